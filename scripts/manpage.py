#!/usr/bin/env python3
"""A man page (section 1) for a Kiosk program, made from its own help.

    scripts/manpage.py PROGRAM VERSION DATE > PROGRAM.1

PROGRAM is the built executable (kiosk or kiosk-server); what it prints for
`--experimental-dump-help` (swift-argument-parser's description of every command, option and
flag) becomes the page, so the page says what `--help` says and cannot drift from it. The program
runs with an empty environment: every option's default can come from a KIOSK_* variable, and the
page must show the built-in defaults, not the packager's. DATE (YYYY-MM-DD) goes in the page's
header; scripts/package.sh passes the commit's date, so that a rebuild makes the same page.
"""

import json
import os
import subprocess
import sys

# What each program's page says beyond its help: the files and the other page.
EXTRA = {
    "kiosk": {
        "environment": [
            ("KIOSK_HOME", "The reader's state folder (default $XDG_DATA_HOME/kiosk, else ~/.local/share/kiosk)."),
            ("KIOSK_SERVER", "The store's base URL, when --server is not given."),
        ],
        "files": [
            ("/usr/lib/systemd/user/kiosk-agent.service",
             "The reader's background agent, a systemd user unit: systemctl --user enable --now kiosk-agent."),
        ],
        "see_also": ["kiosk-server(1)"],
    },
    "kiosk-server": {
        "environment": [
            ("KIOSK_*", "Every option of serve can be set by the variable its description names; the option wins."),
        ],
        "files": [
            ("/etc/kiosk/kiosk.env", "The settings of the packaged kiosk@.service instances (KIOSK_* variables)."),
            ("/var/lib/kiosk", "The packaged instances' data folder (--data): keys, admin token, SQLite database, packed archives."),
            ("/usr/lib/systemd/system/kiosk@.service", "One store instance per port: systemctl enable --now kiosk@8081."),
        ],
        "see_also": ["kiosk(1)"],
    },
}


def text(value):
    """Escapes running text for roff: backslashes, and a line that would start a request."""
    value = value.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in value.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def paragraphs(value):
    """A help text's paragraphs (blank-line separated) as roff paragraphs; an indented line
    (an example) keeps its line."""
    out = []
    for block in value.strip().split("\n\n"):
        lines = block.split("\n")
        if any(line.startswith(" ") for line in lines[1:]) or all(line.startswith(" ") for line in lines):
            out.append(".PP\n.nf\n" + text(block) + "\n.fi")
        else:
            out.append(".PP\n" + text(" ".join(line.strip() for line in lines)))
    return "\n".join(out)


def names(argument):
    spelled = []
    for name in argument.get("names", []):
        if name["kind"] == "short":
            spelled.append("\\fB\\-" + text(name["name"]) + "\\fR")
        elif name["kind"] == "longWithSingleDash":
            spelled.append("\\fB\\-" + text(name["name"]) + "\\fR")
        else:
            spelled.append("\\fB\\-\\-" + text(name["name"]) + "\\fR")
    label = ", ".join(spelled)
    if argument["kind"] == "option":
        label += " \\fI" + text(argument.get("valueName", "value")) + "\\fR"
    elif argument["kind"] == "positional":
        label = "\\fI" + text(argument.get("valueName", "argument")) + "\\fR"
    if argument.get("isRepeating"):
        label += " ..."
    return label


def arguments(command):
    out = []
    for argument in command.get("arguments", []):
        if not argument.get("shouldDisplay", True):
            continue
        out.append(".TP\n" + names(argument))
        description = argument.get("abstract", "")
        if argument.get("allValues"):
            description += " Values: " + ", ".join(argument["allValues"]) + "."
        if "defaultValue" in argument and argument["kind"] == "option":
            description += " Default: " + argument["defaultValue"] + "."
        out.append(text(description.strip()) if description.strip() else "")
        if argument.get("discussion"):
            out.append(".IP\n" + text(argument["discussion"] if isinstance(argument["discussion"], str) else ""))
    return "\n".join(line for line in out if line)


def synopsis(path, command):
    usage = "\\fB" + text(" ".join(path)) + "\\fR"
    if command.get("subcommands"):
        usage += " \\fIcommand\\fR"
    if command.get("arguments"):
        usage += " [\\fIoptions\\fR]"
    return ".HP\n" + usage


def commands(path, command):
    """Each subcommand (depth first) as a subsection: usage, description, options."""
    out = []
    for sub in command.get("subcommands", []):
        if not sub.get("shouldDisplay", True) or sub["commandName"] == "help":
            continue
        full = path + [sub["commandName"]]
        out.append(".SS " + text(" ".join(full[1:])))
        out.append(synopsis(full, sub))
        if sub.get("abstract"):
            out.append(".PP\n" + text(sub["abstract"]))
        if sub.get("discussion"):
            out.append(paragraphs(sub["discussion"]))
        if sub.get("arguments"):
            out.append(".PP\nOptions:\n.RS")
            out.append(arguments(sub))
            out.append(".RE")
        out.extend(commands(full, sub))
    return out


def page(program, version, date):
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    dump = subprocess.run([program, "--experimental-dump-help"], env=environment, check=True,
                          capture_output=True, text=True).stdout
    command = json.loads(dump)["command"]
    name = command["commandName"]
    extra = EXTRA.get(name, {})
    out = [
        '.TH "%s" "1" "%s" "%s %s" "User Commands"' % (name.upper(), date, name, version),
        ".SH NAME",
        text(name) + " \\- " + text(command.get("abstract", "")),
        ".SH SYNOPSIS",
        synopsis([name], command),
        ".SH DESCRIPTION",
        paragraphs(command.get("discussion", "") or command.get("abstract", "")),
    ]
    if command.get("arguments"):
        out += [".SH OPTIONS", arguments(command)]
    subcommands = commands([name], command)
    if subcommands:
        out += [".SH COMMANDS"] + subcommands
    if extra.get("environment"):
        out.append(".SH ENVIRONMENT")
        for variable, meaning in extra["environment"]:
            out += [".TP", "\\fB" + text(variable) + "\\fR", text(meaning)]
    if extra.get("files"):
        out.append(".SH FILES")
        for path, meaning in extra["files"]:
            out += [".TP", "\\fI" + text(path) + "\\fR", text(meaning)]
    if extra.get("see_also"):
        out += [".SH SEE ALSO", ", ".join("\\fB" + text(page.split("(")[0]) + "\\fR(" + page.split("(")[1] for page in extra["see_also"])]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().split("\n\n")[1])
    sys.stdout.write(page(*sys.argv[1:]))
