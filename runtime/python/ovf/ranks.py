"""python3 -m ovf.ranks DIR | CORE... | --pid PID,... | --live [--json]

The verdict of a whole job: which rank made a non-finite value first, and which
ranks went non-finite after it. From the event summaries its processes left in
DIR (`--event-dir DIR`, OVF_EVENT_DIR, ovf.enable(event_dir=...)), or from the
rings themselves: the ranks' core files, the live processes given by --pid, or
every process on this host with ovf's runtime (--live; a job stopped in a
debugger, waiting, or still training). A job of thousands of ranks is judged
from the summaries' few hundred bytes a rank, without reading any ring; the
verdict names the rank whose ring or core to open.

Each summary holds the rank, batch, CLOCK_REALTIME of the first non-finite
value, the op, module and line, and whether that process made the value from
finite ones (a producer) or received it (a carrier: a parameter or gradient
already non-finite -- what an all-reduce or an optimizer step delivers -- or an
input). Ranks are ordered by that time: across hosts the order is as good as
their clocks agree. Summaries are found in DIR and its subdirectories. A ring
is read as the summary its process would write. Exit status: 0, or 2 when no
summary or ring holds a non-finite value and none was read clean, or a file or
process could not be read (one line each on stderr; the verdict of the others is
still given). It does not import torch.
"""

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass

PATTERN = ("ovf-event-", ".json")
RECEIVED = re.compile(r"it arrived through (\S+), a collective")
FIELDS = ("rank", "world_size", "batch", "time_ns", "role", "what")
# A summary's "kind" (event_summary.cpp) in words, with its "module" for {}.
PLACES = {
    "module output": "the output of {}",
    "module input": "an input of {}",
    "parameter": "a parameter of {}",
    "gradient": "the gradient of {}",
    "buffer": "a buffer of {}",
    "optimizer step": "optimizer.step into {}",
    "checkpoint": "the checkpoint {}",
}


@dataclass
class Summary:
    path: str
    data: dict

    def __getattr__(self, name):
        try:
            return self.__dict__["data"][name]
        except KeyError:
            raise AttributeError(name) from None

    def who(self):
        return f"rank {self.rank}" if self.rank >= 0 else f"pid {self.data.get('pid')}"

    def collective(self):
        """The collective a carrier's value arrived through ("c10d::allreduce_"), from the
        runtime's why-line for it (op_outputs.cpp's received_why), else None."""
        found = RECEIVED.match(self.data.get("why") or "")
        return found[1] if found and self.role != "producer" else None

    def place(self):
        """ "aten::exp in blocks.1.amp at model.py:88 in forward", "the output of
        blocks.1.amp at ...", "optimizer.step into blocks.0.fc.weight at ..." """
        module = self.data.get("module") or "no module"
        kind = self.data.get("kind")
        if self.data.get("op"):
            where = f"{self.op} in {module}"
        elif kind in PLACES:
            where = PLACES[kind].format(module)
        else:
            where = f"{kind or 'a value'} in {module}"
        line = self.data.get("line")
        return where + (f" at {line}" if line else "")


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m ovf.ranks",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "sources",
        nargs="*",
        metavar="DIR|CORE",
        help="where the ranks left their event summaries, or the ranks' core files",
    )
    p.add_argument(
        "--pid",
        type=_pids,
        action="extend",
        default=[],
        metavar="PID,...",
        help="read the rings of these live processes of this host (/proc/PID/mem)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="read every process of this host that has ovf's runtime loaded",
    )
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    return p


def _pids(text):
    parts = text.split(",")
    if not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of process ids (1234,1235)")
    return [int(part) for part in parts]


def read_summaries(directory):
    """([Summary], [one-line error]) of every ovf-event-*.json under `directory`."""
    found, errors = [], []
    for parent, _dirs, files in os.walk(directory):
        for name in sorted(files):
            if not (name.startswith(PATTERN[0]) and name.endswith(PATTERN[1])):
                continue
            path = os.path.join(parent, name)
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                errors.append(f"ovf: cannot read the event summary {path}: {e}")
                continue
            missing = [k for k in FIELDS if not isinstance(data, dict) or k not in data]
            if missing or data.get("ovf_event_summary") != 1:
                errors.append(
                    f"ovf: {path} is not an ovf event summary of version 1"
                    + (f" (no {', '.join(missing)})" if missing else "")
                )
                continue
            found.append(Summary(path, data))
    return found, errors


def ranges(numbers):
    """[0, 1, 2, 4, 7, 8] -> "0-2,4,7-8"."""
    out, numbers = [], sorted(numbers)
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ",".join(out)


def _ranks(summaries):
    """ "rank 0" or "ranks 0-4,6" """
    numbers = [s.rank for s in summaries]
    return ("rank " if len(numbers) == 1 else "ranks ") + ranges(numbers)


def _after(t0, summaries):
    """ "+0.013 s" or "+0.013 s to +0.095 s": when `summaries` went non-finite, from t0."""
    lo = min(s.time_ns for s in summaries) - t0
    hi = max(s.time_ns for s in summaries) - t0
    return f"{lo / 1e9:+.3f} s" + ("" if hi == lo else f" to {hi / 1e9:+.3f} s")


def _replay_lines(replay):
    """The replay at the rank's event, as its stop summary words it (or [])."""
    if not isinstance(replay, dict) or not isinstance(replay.get("said"), str):
        return []
    lines = [f"  replay: {replay['said']}"]
    if replay.get("op"):
        at = f" at {replay['line']}" if replay.get("line") else ""
        lines.append(f"    produced by {replay['op']} in {replay.get('module') or 'no module'}{at}")
        lines += [f"    {key}: {replay[key]}" for key in ("why", "verdict") if replay.get(key)]
    return lines


def verdict(summaries, clean=(), clean_lines=()):
    """The verdict as a dict (the --json document; its "lines" the text); `clean`:
    the ranks whose rings were read and hold no non-finite value, `clean_lines`
    the words for them."""
    ordered = sorted(summaries, key=lambda s: (s.time_ns, s.rank))
    producers = [s for s in ordered if s.role == "producer"]
    first = producers[0] if producers else ordered[0]
    world = max(s.world_size for s in ordered)
    seen = {s.rank for s in ordered}
    lines = []
    if producers:
        lines.append(f"first producer: {first.who()}, batch {first.batch}, {first.place()}")
    else:
        lines.append(
            f"first non-finite: {first.who()}, batch {first.batch}, {first.place()}: it arrived "
            "there (no rank made it from finite values where ovf looked)"
        )
    lines.append(f"  {first.what}")
    if first.data.get("why"):
        lines.append(f"  why: {first.why}")
    if first.data.get("verdict"):
        lines.append(f"  verdict: {first.verdict}")
    lines += _replay_lines(first.data.get("replay"))
    rows = first.data.get("rows")
    # as the report has them: only where the batch's samples are known
    if isinstance(rows, dict) and isinstance(rows.get("text"), str) and first.data.get("samples"):
        lines.append(f"  {rows['text']}")
    for held in first.data.get("samples") or ():
        kept, total = len(held["indices"]), held["total"]
        share = f"{total} of {total}" if kept == total else f"the first {kept} of {total}"
        indices = ", ".join(map(str, held["indices"]))
        lines.append(
            f"  batch {first.batch} held dataset indices {indices} ({held['dataset']}, {share})"
        )
    before = [s for s in ordered if s.time_ns < first.time_ns]
    later = [s for s in ordered if s is not first and s not in before]
    if before:
        one = len(before) == 1
        lines.append(
            f"{_ranks(before)} went non-finite before it ({_after(first.time_ns, before)}), as "
            + ("a carrier: what it" if one else "carriers: what they")
            + " received came from outside what ovf watched"
        )
    carriers = [s for s in later if s.role != "producer"]
    by_collective = {}
    for s in carriers:
        by_collective.setdefault(s.collective(), []).append(s)
    for collective, group in by_collective.items():
        through = f" through {collective}" if collective else ""
        lines.append(
            f"{_ranks(group)} received it later ({_after(first.time_ns, group)}){through}, as "
            + ("a carrier" if len(group) == 1 else "carriers")
        )
    for s in (s for s in later if s.role == "producer"):
        lines.append(
            f"{s.who()} also made one of its own after ({_after(first.time_ns, [s])}): batch "
            f"{s.batch}, {s.place()}"
        )
    lines += clean_lines
    missing = sorted(set(range(world)) - seen - set(clean)) if world > 1 else []
    if missing:
        lines.append(
            f"no summary from {len(missing)} of {world} ranks: {ranges(missing)} (no event "
            "there, or it died before its first)"
            if not clean_lines
            else f"nothing read from {len(missing)} of {world} ranks: {ranges(missing)} (not "
            "given, on another host, or no event there)"
        )
    ranks = [s.rank for s in ordered if s.rank >= 0]
    if len(set(ranks)) != len(ranks):
        lines.append("ovf: several summaries have the same rank: they may come from different runs")
    if len({s.data.get("host") for s in ordered}) > 1:
        lines.append("ovf: the ranks ran on several hosts: the order is as good as their clocks")
    return {
        "first": first.data,
        "first_is_producer": bool(producers),
        "later": [s.data for s in later],
        "missing_ranks": missing,
        "lines": lines,
    }


def _live_job(given):
    """(pids, errors): the processes of the one torch.distributed job on this host
    that have ovf's runtime (beside the `given` ones); an error where there is none,
    or several jobs to choose from."""
    from ovf_ring.proc_target import runtime_processes

    jobs = {}
    for pid, job in runtime_processes().items():
        if job and pid not in given:
            jobs.setdefault(job, []).append(pid)
    if len(jobs) > 1:
        listed = "; ".join(f"{job}: {','.join(map(str, pids))}" for job, pids in jobs.items())
        return [], [
            f"ovf: {len(jobs)} torch.distributed jobs on this host have ovf's runtime: name one "
            f"job's processes with --pid ({listed})"
        ]
    if not jobs and not given:
        return [], [
            "ovf: no torch.distributed process of this host that this user may read has ovf's "
            "runtime loaded"
        ]
    return next(iter(jobs.values()), []), []


def _gather(args):
    """(summaries, clean ranks, lines for them, errors) of every source given."""
    summaries, errors = [], []
    directories = [p for p in args.sources if os.path.isdir(p)]
    for directory in directories:
        found, failed = read_summaries(directory)
        summaries += found
        errors += failed
        if not found and not failed:
            errors.append(
                f"ovf: no event summaries (ovf-event-*.json) in {directory}: run the job with "
                "python3 -m ovf --event-dir DIR, or OVF_EVENT_DIR=DIR"
            )
    cores = [p for p in args.sources if p not in directories and os.path.exists(p)]
    errors += [
        f"ovf: {p!r} is not there: give a directory of event summaries or a core file"
        for p in args.sources
        if not os.path.exists(p)
    ]
    pids = list(dict.fromkeys(args.pid))
    if args.live:
        found, failed = _live_job(pids)
        pids += found
        errors += failed
    if not cores and not pids:
        return summaries, [], [], errors
    from ovf_ring import rank_rings

    found, clean, failed = rank_rings.read(cores, pids)
    summaries += [Summary(source, data) for source, data in found]
    return summaries, [h.rank for _, h in clean], rank_rings.clean_text(clean), errors + failed


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if not (args.sources or args.pid or args.live):
        parser.error("give DIR (the event summaries), the ranks' CORE files, --pid or --live")
    summaries, clean, clean_lines, errors = _gather(args)
    for e in errors:
        print(e, file=sys.stderr)
    if not summaries:
        if clean_lines:
            print("\n".join(["no rank read holds a non-finite value", *clean_lines]))
        return 2 if errors or not clean_lines else 0
    result = verdict(summaries, clean, clean_lines)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print("\n".join(result["lines"]))
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
