"""The archives the server published, kept by the driver as the catalog named them (hard-linked
out of the server's content folder, so the server removing an old one later does not matter), and
the trees they unpack to with Python's own zipfile and tarfile: what every installed tree is
compared with, byte for byte. A publication file (an EPUB sold as the file itself) is not unpacked:
its tree is its one file, under the name the catalog gives it, whose SHA-256 is the version's; its
manifest (the content-defined chunks the store cut it into) is kept too, for the checks of its
updates by chunks."""
import hashlib, json, os, shutil, tarfile, zipfile
from collections import Counter


class Published:
    """The archives the server published, by SHA-256, and the trees they unpack to, read with
    Python's own zipfile and tarfile: what the checker compares installed trees with."""

    def __init__(self, folder):
        self.folder = folder
        self.trees = {}
        self.files = {}          # product → the file name a publication file is installed under
        self.chunk_lists = {}

    def keep(self, sha, content):
        """Hard-links (or copies) the archive `sha` and its manifest from the server's content
        folder, once."""
        self.folder.mkdir(exist_ok=True)
        for source in content.glob(f"{sha}.*"):
            if (self.folder / source.name).exists():
                continue
            try:
                os.link(source, self.folder / source.name)
            except OSError:
                shutil.copyfile(source, self.folder / source.name)

    def archive(self, sha, content):
        self.keep(sha, content)
        found = [p for p in self.folder.glob(f"{sha}.*") if not p.name.endswith(".manifest.json")]
        return found[0] if found else None

    def chunks(self, sha, content=None):
        """The content-defined chunks of publication file `sha` as the store's manifest lists them:
        [(offset, length, SHA-256)], or None when its manifest was not kept (or lists none)."""
        if sha in self.chunk_lists:
            return self.chunk_lists[sha]
        if content is not None:
            self.keep(sha, content)
        try:
            manifest = json.loads((self.folder / f"{sha}.manifest.json").read_text())
            placed, offset = [], 0
            for chunk in manifest.get("chunks") or []:
                placed.append((offset, chunk["length"], chunk["sha256"]))
                offset += chunk["length"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not placed:
            return None
        self.chunk_lists[sha] = placed
        return placed

    def tree(self, sha, content, product=None):
        """Relative path → SHA-256 / '<dir>' / '<link>' of the archive `sha` unpacked, as
        stores.tree gives for a folder (a publication file's: its one file); None when no such
        archive was published (or its bytes are not `sha`)."""
        key = (sha, self.files.get(product))
        if key in self.trees:
            return self.trees[key]
        path = self.archive(sha, content)
        result = None
        if path is not None:
            digest = hashlib.sha256()
            with open(path, "rb") as archive:
                for block in iter(lambda: archive.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() == sha:
                result = {}
                if product in self.files:
                    # Installed as the publisher's file itself, byte for byte: Library/<id>/<name>.
                    result[self.files[product]] = sha
                elif path.name.endswith(".zip") or path.name.endswith(".epub"):
                    with zipfile.ZipFile(path) as archive:
                        for info in archive.infolist():
                            name = info.filename.strip("/")
                            if info.is_dir():
                                result[name] = "<dir>"
                            elif (info.external_attr >> 16) & 0o170000 == 0o120000:
                                result[name] = "<link>"
                            else:
                                result[name] = hashlib.sha256(archive.read(info)).hexdigest()
                else:
                    with tarfile.open(path) as archive:
                        for member in archive:
                            name = member.name.removeprefix("./").strip("/")
                            if not name or name == ".":
                                continue
                            if member.isdir():
                                result[name] = "<dir>"
                            elif member.issym():
                                result[name] = "<link>"
                            elif member.isfile():
                                result[name] = hashlib.sha256(archive.extractfile(member).read()).hexdigest()
                # Folders an archive implies without an entry of their own.
                for name in list(result):
                    parts = name.split("/")
                    for depth in range(1, len(parts)):
                        result.setdefault("/".join(parts[:depth]), "<dir>")
        self.trees[key] = result
        return result

    def compare(self, actual, product, sha, versions, content):
        """None when the installed tree `actual` (as stores.tree gives it) is, byte for byte, the
        published archive `sha` of `product` (one of `versions`, the SHA-256s the catalog named for
        it); otherwise what is wrong: a version never published, or the files that differ and the
        versions they are from."""
        short = {v: f"v{i + 1}" for i, v in enumerate(versions)}
        name = lambda v: f"{short.get(v, '?')} ({v[:12]})"
        if sha not in versions:
            return f"is installed as {sha[:12]}, a version the store never published for it (published: {', '.join(map(name, versions)) or 'none seen'})"
        expected = self.tree(sha, content, product)
        if expected is None:
            return f"is installed as {name(sha)}, whose archive is gone from the server (it cannot be checked)"
        if actual == expected:
            return None
        equal = [v for v in versions if v != sha and self.tree(v, content, product) == actual]
        if equal:
            return f"is installed as {name(sha)} but its tree is exactly {name(equal[0])}"
        differing = sorted(p for p in set(actual) | set(expected) if actual.get(p) != expected.get(p))
        # Where each differing path's bytes come from: another published version, or none.
        origins = Counter()
        examples = []
        for path in differing:
            if path not in actual:
                origin = "missing"
            else:
                origin = "/".join(short[v] for v in versions if v != sha and (self.tree(v, content, product) or {}).get(path) == actual[path]) or "no version"
            origins[origin] += 1
            if len(examples) < 4:
                examples.append(f"{path} ({origin})")
        kind = "spliced" if any(o.startswith("v") for o in origins) else "differs"
        return (f"is installed as {name(sha)} but {kind}: {len(differing)} of {len(expected)} paths differ, "
                f"{', '.join(f'{n} from {o}' if o.startswith('v') or o == 'no version' else f'{n} {o}' for o, n in sorted(origins.items()))}; e.g. {', '.join(examples)}")
