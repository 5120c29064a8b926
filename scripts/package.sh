#!/usr/bin/env bash
# A Debian package (.deb) of Kiosk: both programs, the systemd units, the kiosk user, the settings
# in /etc/kiosk and the data folder /var/lib/kiosk. `make package` runs it on the release build.
#
#   scripts/package.sh --bin DIR [--out DIR] [--compress xz|gzip|zstd|none] [--level N] [--lintian]
#
# --bin   the folder holding the built kiosk and kiosk-server (make package: the release build's)
# --out   where the .deb goes (default .build/package); the last line printed is its path
# --compress, --level  dpkg-deb's compression of the files and its level (default xz at dpkg-deb's
#         level; the test takes gzip at 1, for speed)
# --lintian   judge the package with lintian too, and fail on any error it finds (make package)
#
# The package is made from a staging tree by dpkg-deb --root-owner-group, not by debhelper (no
# debian/ source package): the binaries are copied and stripped, the units are deploy/'s with the
# packaged paths, the maintainer scripts, settings sample, sysusers.d file and lintian overrides are
# deploy/package/'s, and the man pages, copyright and changelog are made here. Needs dpkg-dev
# (dpkg-shlibdeps, which works out the libraries' packages), python3 and binutils (strip).
# The version is ProgramVersion.number (Sources/KioskCommandLine/ProgramVersion.swift), which the
# binaries must print for --version. File times are the commit's (SOURCE_DATE_EPOCH), so the same
# commit and binaries make the same package.
set -euo pipefail
trap 'echo "package.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=""
out="$repo/.build/package"
compress=xz
level=""
lint=0
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --compress) compress=${2:?--compress needs xz, gzip, zstd or none}; shift 2 ;;
    --level) level=${2:?--level needs a number}; shift 2 ;;
    --lintian) lint=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
fail() { echo "package.sh: $*" >&2; exit 1; }
[ -n "$bin" ] || fail "name the folder of the built programs: --bin .build/release (make package does)"
for program in kiosk kiosk-server; do
    [ -x "$bin/$program" ] || fail "$bin/$program is missing or not executable: build both programs first"
done
for tool in dpkg-deb dpkg-shlibdeps strip python3 gzip; do
    command -v "$tool" >/dev/null || fail "$tool is missing: make package installs it (apt-get install dpkg-dev binutils python3)"
done

# The version: ProgramVersion.number, which both programs must say they are.
version=$(sed -n 's/.*static let number = "\([^"]*\)".*/\1/p' "$repo/Sources/KioskCommandLine/ProgramVersion.swift")
[ -n "$version" ] || fail "no version in Sources/KioskCommandLine/ProgramVersion.swift (static let number = \"…\")"
for program in kiosk kiosk-server; do
    said=$(env -i PATH=/usr/bin:/bin "$bin/$program" --version | sed -n 1p)
    [ "$(echo "$said" | cut -d' ' -f1,2)" = "$program $version" ] ||
        fail "$bin/$program says \"$said\", the source says $version: rebuild it"
done
arch=$(dpkg --print-architecture)
# The commit the binaries were built from, as they say it (the changelog names it).
commit=$(echo "$said" | sed -n 's/.*(commit \([^)]*\)).*/\1/p')
[ -n "$commit" ] || commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}
maintainer=${DEB_MAINTAINER:-Kiosk maintainers <maintainers@kiosk.example>}

mkdir -p "$out"
out=$(cd "$out" && pwd)
deb="$out/kiosk_${version}_${arch}.deb"
stage=$(mktemp -d "$out/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
umask 022

# The programs, stripped the way dh_strip does.
install -d "$root/usr/bin"
for program in kiosk kiosk-server; do
    install -m 0755 "$bin/$program" "$root/usr/bin/$program"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$program"
done
"$root/usr/bin/kiosk-server" --version >/dev/null || fail "the stripped kiosk-server does not run"

# The units: deploy/'s, from their [Unit] line on (their header says how to install them by hand),
# with the packaged paths; the header says how to use them installed.
unit() { # source, header → the packaged unit on stdout
    printf '%s\n' "$2"
    sed -n '/^\[Unit\]/,$p' "$1" | sed \
        -e 's#install both programs from \.build/release into /usr/local/bin#the kiosk package installs both in /usr/bin#' \
        -e 's#/usr/local/bin/#/usr/bin/#g' \
        -e 's#%h/\.local/bin/kiosk#/usr/bin/kiosk#g' \
        -e '/^Description=/a Documentation=man:'"$3"'(1)'
}
install -d "$root/usr/lib/systemd/system" "$root/usr/lib/systemd/user"
unit "$repo/deploy/kiosk@.service" "# One Kiosk store instance per port (the kiosk package): systemctl enable --now kiosk@8081
# Settings: /etc/kiosk/kiosk.env; data: /var/lib/kiosk. More: deploy/kiosk@.service in Kiosk's
# source, and /usr/share/doc/kiosk/examples/nginx.conf for several instances behind nginx.
" kiosk-server >"$root/usr/lib/systemd/system/kiosk@.service"
unit "$repo/deploy/kiosk-agent.service" "# The reader's background agent, a systemd *user* unit (the kiosk package). Enable it as the
# reader, not root: systemctl --user enable --now kiosk-agent; see it: journalctl --user -u kiosk-agent -f
# It uses the reader's KIOSK_HOME and the server of their last \`kiosk sync --server URL\`, not
# /etc/kiosk/kiosk.env (the store's settings, which readers cannot read).
" kiosk >"$root/usr/lib/systemd/user/kiosk-agent.service"
chmod 0644 "$root"/usr/lib/systemd/*/*
service="$root/usr/lib/systemd/system/kiosk@.service"
grep -q '^ExecStart=/usr/bin/kiosk-server ' "$service" || fail "kiosk@.service's ExecStart does not run /usr/bin/kiosk-server"
grep -q '^EnvironmentFile=/etc/kiosk/kiosk.env$' "$service" || fail "kiosk@.service does not read /etc/kiosk/kiosk.env"
grep -q '^ExecStart=/usr/bin/kiosk ' "$root/usr/lib/systemd/user/kiosk-agent.service" || fail "kiosk-agent.service's ExecStart does not run /usr/bin/kiosk"
! grep -n '/usr/local\|\.local/bin' "$root"/usr/lib/systemd/*/* || fail "a packaged unit still names a path outside the package (above)"

# The kiosk user (systemd-sysusers, or adduser in postinst), the settings and the data folder.
install -D -m 0644 "$repo/deploy/package/kiosk.sysusers" "$root/usr/lib/sysusers.d/kiosk.conf"
install -D -m 0640 "$repo/deploy/package/kiosk.env" "$root/etc/kiosk/kiosk.env"
install -d -m 0700 "$root/var/lib/kiosk"
install -D -m 0644 "$repo/deploy/package/lintian-overrides" "$root/usr/share/lintian/overrides/kiosk"
install -D -m 0644 "$repo/deploy/tax/eu-epublications.json" "$root/usr/share/kiosk/tax/eu-epublications.json"

# The man pages, made from the programs' own help.
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
install -d "$root/usr/share/man/man1"
for program in kiosk kiosk-server; do
    python3 "$repo/scripts/manpage.py" "$root/usr/bin/$program" "$version" "$date" >"$root/usr/share/man/man1/$program.1"
    gzip -9n "$root/usr/share/man/man1/$program.1"
done

# The documentation: copyright, changelog (a native package: changelog.gz), the nginx example.
doc="$root/usr/share/doc/kiosk"
install -d "$doc/examples"
install -m 0644 "$repo/deploy/nginx.conf" "$doc/examples/nginx.conf"
{
    echo "kiosk ($version) unstable; urgency=medium"
    echo
    echo "  * Kiosk $version, commit $commit, packaged by scripts/package.sh."
    echo
    echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"
python3 - "$repo" >"$doc/copyright" <<'PYTHON'
# The copyright file (DEP-5): Kiosk's own, then every package the programs are built with, which
# the release build links in statically (Package.resolved, with each checkout's LICENSE and
# NOTICE), and the Swift runtime (--static-swift-stdlib).
import json, os, re, sys, textwrap

repo = sys.argv[1]
def block(text):
    """A multi-line value: each line indented, blank lines as ' .'."""
    if "\n" not in text.strip():
        text = textwrap.fill(text, 78, break_on_hyphens=False, break_long_words=False)
    return "\n".join(" " + line.rstrip() if line.strip() else " ." for line in text.strip("\n").split("\n"))
def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle: return handle.read()
    except OSError: return None
def first(folder, names):
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.upper().split(".")[0] in names: return os.path.join(folder, name)
    return None

print("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
print("Upstream-Name: Kiosk")
print("Comment:" + "\n" + block(
    "The programs are built from Kiosk's source with the Swift packages below linked in "
    "statically; their licences follow Kiosk's own. So is the Swift runtime (standard library, "
    "Foundation, Dispatch) of the toolchain that built them: Apache-2.0 with the Swift Runtime "
    "Library Exception, which asks no attribution of programs built with it; Foundation carries "
    "ICU's code and data (Unicode licence, https://www.unicode.org/license.txt)."))
print()
print("Files: *")
print("Copyright: the Kiosk authors")
print("License: Kiosk")
print(block("The Kiosk source states no licence of its own yet: ask its maintainers before you "
            "pass these programs on."))
texts = {}
resolved = json.load(open(os.path.join(repo, "Package.resolved")))
for pin in sorted(resolved["pins"], key=lambda pin: pin["identity"]):
    location = pin["location"]
    name = os.path.basename(location.rstrip("/"))
    name = name[:-4] if name.endswith(".git") else name
    checkout = os.path.join(repo, ".build", "checkouts", name)
    licence_file = first(checkout, {"LICENSE", "LICENCE", "COPYING"})
    licence_text = read(licence_file) if licence_file else None
    notice_file = first(checkout, {"NOTICE", "NOTICES"})
    notice = read(notice_file) if notice_file else None
    if licence_text is None:
        licence = "other"
        comment = "Its licence is in its repository, " + location
    elif "Apache License" in licence_text and "Version 2.0" in licence_text:
        licence = "Apache-2.0"
        if "Runtime Library Exception" in licence_text:
            licence += " with Swift-Runtime-Library exception"
            texts["Swift-Runtime-Library"] = licence_text[licence_text.index("## Runtime Library Exception"):]
        comment = None
    elif "Permission is hereby granted, free of charge" in licence_text:
        licence = "Expat"
        texts["Expat"] = licence_text[licence_text.index("Permission is hereby granted"):]
        comment = None
    else:
        licence = "other-" + name
        texts[licence] = licence_text
        comment = None
    holders = []
    for line in (licence_text or "").split("\n") + (notice or "").split("\n"):
        line = line.strip()
        if re.match(r"(?i)copyright\s+(\(c\)|©|\d)", line) and line not in holders:
            holders.append(line)
    version = pin["state"].get("version") or pin["state"].get("revision", "")[:12]
    print()
    print("Files: .build/checkouts/%s/*" % name)
    print("Copyright: " + ("\n ".join(holders) if holders else "the %s authors" % name))
    print("License: " + licence)
    print("Comment:\n" + block("%s %s, %s" % (name, version, location)
                                + ("\n" + comment if comment else "")
                                + ("\n\n" + notice if notice else "")))
print()
print("License: Apache-2.0")
print(block("On Debian systems, the complete text of the Apache License, Version 2.0, is in "
            "/usr/share/common-licenses/Apache-2.0."))
for name, text in sorted(texts.items()):
    print()
    if name == "Swift-Runtime-Library":
        print("License: Apache-2.0 with Swift-Runtime-Library exception")
        print(block("On Debian systems, the complete text of the Apache License, Version 2.0, is in "
                    "/usr/share/common-licenses/Apache-2.0; the exception:\n\n" + text.replace("#", "").strip()))
    else:
        print("License: " + name)
        print(block(text))
PYTHON

# The control files.
control="$root/DEBIAN"
install -d "$control"
for script in postinst prerm postrm; do
    install -m 0755 "$repo/deploy/package/$script" "$control/$script"
done
echo /etc/kiosk/kiosk.env >"$control/conffiles"
# The shared libraries' packages, as dpkg-shlibdeps finds them (it wants a debian/control to
# stand in). A debug build links the toolchain's Swift runtime, which no package holds: its
# libraries are left out of Depends with a warning (such a package runs only beside that toolchain).
shlibs="$stage/shlibs"
mkdir -p "$shlibs/debian"
printf 'Source: kiosk\n\nPackage: kiosk\nArchitecture: any\n' >"$shlibs/debian/control"
missing=()
quiet='binaries to analyze should already be installed'
if readelf -d "$root/usr/bin/kiosk-server" | grep 'libswiftCore\.so' >/dev/null; then
    echo "package.sh: warning: these programs link the Swift runtime dynamically (a debug build?): the package runs only where that toolchain is; make package builds the release" >&2
    missing=(--ignore-missing-info)
    quiet="$quiet"'\|no dependency information found\|Note: libraries are not searched\|libswift\|libFoundation\|libdispatch\|libBlocksRuntime'
fi
depends=$(cd "$shlibs" && dpkg-shlibdeps "${missing[@]}" -O -e "$root/usr/bin/kiosk" -e "$root/usr/bin/kiosk-server" 2>"$stage/shlibdeps.log") ||
    { cat "$stage/shlibdeps.log" >&2; fail "dpkg-shlibdeps failed"; }
grep -v "$quiet" "$stage/shlibdeps.log" >&2 || true
depends=${depends#shlibs:Depends=}
[ -n "$depends" ] || fail "dpkg-shlibdeps found no libraries"
# libarchive is loaded by dlopen the first time an archive is packed or unpacked
# (Sources/CArchive/LazyArchive.c), so no ELF header names it: its package is added by hand.
# awk reads to the end: an early exit would cut ldconfig off mid-write, and pipefail turned its
# SIGPIPE into this script's failure (status 141, once in make test on a busy machine).
archive=$(ldconfig -p | awk '$1 == "libarchive.so.13" && !found { print $NF; found = 1 }')
[ -n "$archive" ] || fail "libarchive.so.13 is not installed (apt-get install libarchive13)"
archive=$(dpkg -S "$(readlink -f "$archive")" | sed -n '1s/:.*//p')
depends="$archive (>= 3.6), $depends"
size=$(du -k -s --apparent-size --exclude=DEBIAN "$root" | cut -f1)
cat >"$control/control" <<EOF
Package: kiosk
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: adduser, $depends
Section: net
Priority: optional
Description: content store for books and magazines: server and reader client
 Kiosk sells and delivers books and magazines: kiosk-server is the store (its
 catalog, purchases, subscriptions and receipts, over SQLite or PostgreSQL,
 behind nginx or alone), and kiosk is the reader's client, which buys,
 downloads, resumes and updates what the reader owns.
 .
 The package runs store instances as systemd units (kiosk@PORT.service) as
 the kiosk user, with their settings in /etc/kiosk/kiosk.env and their data in
 /var/lib/kiosk; readers may run the background agent as a user unit
 (kiosk-agent.service).
EOF
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum | sed 's# \./# #') >"$control/md5sums"
chmod 0644 "$control/control" "$control/conffiles" "$control/md5sums"

find "$root" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch -h -d "@$SOURCE_DATE_EPOCH"
rm -f "$deb"
dpkg-deb --root-owner-group -Z"$compress" ${level:+-z"$level"} --build "$root" "$deb" >/dev/null
if [ "$lint" = 1 ]; then
    command -v lintian >/dev/null || fail "lintian is missing: make package installs it (apt-get install lintian)"
    # lintian leaves a file in TMPDIR at every run (Lintian::Storage::MLDBM's mldbm-elf-*): it
    # gets a folder of the staging tree, removed with it.
    mkdir "$stage/lintian-tmp"
    TMPDIR="$stage/lintian-tmp" lintian --fail-on error "$deb" >&2 || fail "lintian found errors in $deb (above)"
fi
echo "$deb"
