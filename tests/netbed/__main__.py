"""``python -m tests.netbed up|down|exec|list``: the test bed by hand (as root).

- ``up [--slots N] [--delay-ms D]``: build a bed, print its prefix and addresses, leave
  it running;
- ``exec PREFIX HOST CMD...``: run CMD on HOST with the bed's environment (Ray token,
  Redis password), e.g. ``exec zf1a2b3 head zeroforge status --json --address ...``;
- ``down PREFIX`` (or ``--all``): kill its processes, delete its namespaces and links;
- ``list``: the beds that exist.
"""

from __future__ import annotations

import argparse
import os
import sys

from tests.netbed import HOSTS, Bed, BedConfig, BedError, beds, teardown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.netbed")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="build a bed and leave it running")
    up.add_argument("--slots", type=int, default=3, help="self-play slots per worker node")
    up.add_argument("--delay-ms", type=float, default=0.0,
                    help="latency the Redis relay adds each way (0: no relay)")
    down = sub.add_parser("down", help="tear a bed down")
    down.add_argument("prefix", nargs="?")
    down.add_argument("--all", action="store_true", help="every bed on this machine")
    ex = sub.add_parser("exec", help="run a command on a host of a bed")
    ex.add_argument("prefix")
    ex.add_argument("host", choices=HOSTS)
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    sub.add_parser("list", help="beds that exist")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            bed = Bed(BedConfig(worker_slots=args.slots, delay_ms=args.delay_ms)).up()
            print(f"bed {bed.prefix}: " + ", ".join(f"{h} {bed.ip(h)}" for h in HOSTS))
            print(f"ray address {bed.ray_address}; redis url {bed.redis_url} (password in "
                  f"{bed.password_file}); down: python -m tests.netbed down {bed.prefix}")
        elif args.command == "down":
            if not args.all and not args.prefix:
                parser.error("down: give a PREFIX or --all")
            for prefix in beds() if args.all else [args.prefix]:
                teardown(prefix)
                print(f"bed {prefix}: down")
        elif args.command == "exec":
            bed = Bed.load(args.prefix)
            if not args.cmd:
                parser.error("exec: no command")
            os.execvpe("ip", ["ip", "netns", "exec", bed.ns(args.host), *args.cmd],
                       bed.env())
        else:
            for prefix in beds():
                print(prefix)
    except BedError as err:
        print(f"netbed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
