#!/usr/bin/env python3
"""smtp_sink.py: a real SMTP server (aiosmtpd) that keeps what it receives, for the mail tests.

    smtp_sink.py FOLDER [--port N]

Listens on 127.0.0.1 (a free port unless --port), prints one line `port=N` once it accepts
connections, and writes each message it receives as FOLDER/NNNN.eml (numbered on from what the folder holds) (the envelope's recipients in
FOLDER/NNNN.rcpt), renamed into place whole. Runs until SIGTERM or SIGINT. Exit status 2 with one
line when aiosmtpd is missing (`make test-tools` installs it into .build/venv).
"""
import argparse, os, signal, socket, sys, threading

try:
    from aiosmtpd.controller import Controller
except ImportError:
    print("smtp_sink.py: aiosmtpd is missing; run make test-tools (it installs aiosmtpd into .build/venv)", file=sys.stderr)
    sys.exit(2)


class Keep:
    def __init__(self, folder):
        # Numbered on from what an earlier run left in the folder (a restart keeps the mailbox).
        already = len([name for name in os.listdir(folder) if name.endswith(".eml")])
        self.folder, self.count, self.lock = folder, already, threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            name = os.path.join(self.folder, f"{self.count:04d}")
        with open(name + ".rcpt.part", "w") as out:
            out.write("\n".join(envelope.rcpt_tos) + "\n")
        os.rename(name + ".rcpt.part", name + ".rcpt")
        with open(name + ".eml.part", "wb") as out:
            out.write(envelope.original_content or envelope.content)
        os.rename(name + ".eml.part", name + ".eml")
        return "250 Message accepted for delivery"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    os.makedirs(args.folder, exist_ok=True)
    port = args.port or free_port()
    controller = Controller(Keep(args.folder), hostname="127.0.0.1", port=port)
    # Blocked before the server's thread starts (it inherits the mask), then taken here: a
    # Python handler would wait for the main thread to run bytecode, which a wait does not.
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    controller.start()
    print(f"port={port}", flush=True)
    signal.sigwait(stops)
    controller.stop()


if __name__ == "__main__":
    main()
