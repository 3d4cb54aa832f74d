"""Small node probes the checks run inside their jobs (on the partition's node).

  python probe.py hugepages          JSON: hugetlb pools per page size and NUMA node, and
                                     cpu_1g_pages (x86: pdpe1gb; null where not x86)
  python probe.py pick-cpus same-l3  two CPUs (OS indexes) on two cores of one L3 domain
  python probe.py pick-cpus cross-l3 the first CPUs of the first two L3 domains
  python probe.py cores              number of cores this job may use
  python probe.py llc                the node's last-level cache, bytes (all distinct instances;
                                     $TOPOBIND_LLC_BYTES overrides it, e.g. to test a big cache)
  python probe.py stream-size T CAP [E] [TMAX]  "ELEMENTS TRIALS" for STREAM under a cap of
                                     CAP bytes moved per run: the size is E (the site's) or
                                     the rule (4x the LLC, at least 10M) and the trials as many
                                     as the cap allows at that size, T to TMAX (default T);
                                     when T trials do not fit, T trials of a smaller size;
                                     writes stream-size.json
  python probe.py latency-size CAP   the latency check's largest working set: 4x the LLC, at
                                     least 256M, at most CAP; writes latency-size.json
  python probe.py load OUT -- CMD...  run CMD, write OUT (JSON): the CPU time other processes
                                     used on the node meanwhile; exit with CMD's status as a
                                     shell gives it (127/126 in one line when CMD cannot
                                     start, 128+N when signal N ended it; 2, CMD not run,
                                     when OUT cannot be written)

Exit status 3 with a one-line message when the node cannot provide what is asked; 5
(:data:`NOT_APPLICABLE`), a line starting ``not applicable:``, when the check does not apply
to this node at all (cross-l3 on a node of one L3 domain): the check is then skipped with
that line, never failed (TopobindCheck.tb_require_exit).
"""

from __future__ import annotations

import os
import sys

#: the exit status of a probe that found the check does not apply to this node
NOT_APPLICABLE = 5  # no kernel exits 5 (docs/results-format.md), and the line says so too

# 'load' wraps the main command of every check's job: its path imports no json or pathlib
# (topobind.validation.load likewise); the other probes import what they use


def _hugepages() -> int:
    from topobind.measure.hugepages import hugepages_status

    status = hugepages_status()
    doc = {
        str(kib): {
            "nr": pool.nr,
            "free": pool.free,
            "nodes": {str(n): {"nr": v.nr, "free": v.free} for n, v in pool.nodes.items()},
        }
        for kib, pool in status.items()
    }
    doc["cpu_1g_pages"] = _cpu_1g_pages()
    import json

    print(json.dumps(doc))
    return 0


def _cpu_1g_pages(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU can map 1 GiB pages: False on an x86 CPU whose flags lack pdpe1gb,
    True with it, None where /proc/cpuinfo has no x86 flags line (other architectures map
    1 GiB pages by their page-table levels: the pool says)."""
    try:
        with open(cpuinfo, errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line:
            return "pdpe1gb" in line.split(":", 1)[1].split()
    return None


def _pick(kind: str) -> int:
    from topobind.topo.topology import load

    topo = load("live")
    cores_by_l3: dict[int, list[int]] = {}
    for core in topo.cores:
        if core.l3 is not None:
            cores_by_l3.setdefault(core.l3, []).append(core.pus[0])
    domains = [cpus for _l3, cpus in sorted(cores_by_l3.items())]
    if kind == "same-l3":
        two = next((d[:2] for d in domains if len(d) >= 2), None)
        if two is None:
            print("not applicable: no L3 domain of this node holds two usable cores",
                  file=sys.stderr)  # fmt: skip
            return NOT_APPLICABLE
    elif kind == "cross-l3":
        if len(domains) < 2:
            print(f"not applicable: the node has {len(domains)} L3 domain(s); cross-l3 needs "
                  "two", file=sys.stderr)  # fmt: skip
            return NOT_APPLICABLE
        two = [domains[0][0], domains[1][0]]
    else:
        print(f"unknown pair kind {kind!r}", file=sys.stderr)
        return 2
    print(",".join(str(c) for c in two))
    return 0


def _cores() -> int:
    from topobind.topo.topology import load

    print(len(load("live").cores))
    return 0


STREAM_BYTES_PER_ELEMENT = 80  # one trial: copy 2 + scale 2 + add 3 + triad 3 arrays x 8 bytes
STREAM_MIN_ELEMENTS = 10_000_000  # the kernel's default floor (kernels/stream.c)
STREAM_KERNEL_MIN_ELEMENTS = 1000  # the least --elements kernels/stream.c takes
LATENCY_MIN_BYTES = 256 << 20


def parse_size(text: str, what: str) -> int:
    """``40G`` -> bytes (binary suffixes; topobind.inputs.suffixed, the one rule: ASCII
    digits, a tiny value refused, not rounded to 0); exit 3 with one line otherwise."""
    from topobind.errors import TopobindError
    from topobind.inputs import suffixed

    try:
        return suffixed(text, what, 1, (1 << 60) - 1)
    except TopobindError as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)


def parse_count(text: str) -> int:
    """``20M`` -> 20,000,000 (the kernels' decimal suffixes k/M/G), at least the kernel's
    least (:data:`STREAM_KERNEL_MIN_ELEMENTS`)."""
    from topobind.errors import TopobindError
    from topobind.inputs import suffixed

    try:
        return suffixed(text, "elements", STREAM_KERNEL_MIN_ELEMENTS, 10**12, binary=False)
    except TopobindError as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)


def _trials(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 10_000:
        print(f"{what}: {text!r} is not a number of trials (1 to 10000)", file=sys.stderr)
        sys.exit(3)
    return int(text)


def llc_bytes() -> int:
    """Total last-level cache of the node, as the kernels read it (distinct instances of the
    highest cache level in sysfs); ``$TOPOBIND_LLC_BYTES`` overrides it."""
    import glob
    import os

    env = os.environ.get("TOPOBIND_LLC_BYTES", "").strip()
    if env:
        return parse_size(env, "TOPOBIND_LLC_BYTES")
    best, seen, total = 0, set(), 0
    for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*"):
        try:
            level = int(_read(d, "level"))
            kind = _read(d, "type")
            shared = _read(d, "shared_cpu_list")
            size = parse_size(_read(d, "size"), d)
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        if level > best:
            best, seen, total = level, set(), 0
        if level == best and shared not in seen:
            seen.add(shared)
            total += size
    return total


def _read(directory: str, name: str) -> str:
    with open(os.path.join(directory, name), encoding="utf-8") as fh:
        return fh.read().strip()


def _write(name: str, doc: dict) -> None:
    import json

    with open(name, "w") as fh:
        json.dump(doc, fh)


def _stream_size(trials: int, cap: int, given: int | None, most: int | None = None) -> int:
    llc = llc_bytes()
    rule = given or max((4 * llc + 7) // 8, STREAM_MIN_ELEMENTS)
    least = max(trials, 2)  # the stream kernel refuses fewer than 2 trials
    # the cap buys trials at the rule's size first (a best of more trials is a steadier figure:
    # one trial is ~0.1 s, and any other process in it spoils it), then the size shrinks
    fit = cap // (rule * STREAM_BYTES_PER_ELEMENT)
    trials = min(max(fit, least), max(most or least, least))
    per_run = trials * STREAM_BYTES_PER_ELEMENT
    elements = min(rule, cap // per_run)
    if elements < STREAM_KERNEL_MIN_ELEMENTS:  # '0 3' made STREAM exit 2 on every run
        least = STREAM_KERNEL_MIN_ELEMENTS * per_run
        print(f"stream-size: the cap of {cap} bytes moved per run is under the least "
              f"{trials} trials of STREAM can move ({least} bytes: {trials} x "
              f"{STREAM_KERNEL_MIN_ELEMENTS} elements x {STREAM_BYTES_PER_ELEMENT} bytes); "
              "raise StreamCheck.max_bytes_per_run", file=sys.stderr)  # fmt: skip
        return 3
    note = ""
    if elements < rule:
        why = "the site's size" if given else "the rule (each array at least 4x the LLC)"
        note = (
            f"the cap of {cap / 1e9:.1f} GB moved per run ({trials} trials) sets "
            f"{elements / 1e6:.1f}M elements an array, under {why}: {rule / 1e6:.1f}M "
            f"(LLC {llc / 2**20:.0f} MiB); raise StreamCheck.max_bytes_per_run or run the "
            "full tier for a figure that is not partly cache"
        )
    _write(
        "stream-size.json",
        {
            "llc_bytes": llc,
            "rule_elements": rule,
            "elements": elements,
            "trials": trials,
            "bytes_per_run": elements * per_run,
            "cap_bytes": cap,
            "capped": elements < rule,
            "note": note,
        },
    )
    print(elements, trials)
    return 0


def _latency_size(cap: int) -> int:
    llc = llc_bytes()
    rule = max(4 * llc, LATENCY_MIN_BYTES)
    size = min(rule, cap) >> 20 << 20
    if size <= 0:  # '0M': the chase had no working set at all
        print(
            f"latency-size: the cap of {cap} bytes is under 1 MiB, the least working set "
            "the latency check measures; raise LatencyCheck.max_working_set",
            file=sys.stderr,
        )
        return 3
    note = ""
    if size < rule:
        note = (
            f"the cap of {cap >> 20} MiB sets the largest working set under the rule's "
            f"{rule >> 20} MiB (4x the LLC of {llc >> 20} MiB): the latency may be partly cache"
        )
    _write("latency-size.json", {"llc_bytes": llc, "rule_bytes": rule, "bytes": size,
                                 "capped": size < rule, "note": note})  # fmt: skip
    print(f"{size >> 20}M")
    return 0


def _load(out: str, cmd: list[str]) -> int:
    """Run ``cmd`` and record the load it ran under (topobind.validation.load: the one rule)."""
    from topobind.validation.load import run_measured

    return run_measured(cmd, out)


def quick_tier(argv: list[str] | None = None) -> bool:
    """Whether this ReFrame session selects the quick tier: ``-t quick`` (``--tag``, any
    spelling ReFrame takes, alone or in a pattern), or ``$TOPOBIND_TIER=quick``. The quick tier
    bounds each check's cost (see each check's ``tb_cost_model``)."""
    if os.environ.get("TOPOBIND_TIER", "").strip() == "quick":
        return True
    args = list(sys.argv if argv is None else argv)
    for i, a in enumerate(args):
        value = None
        if a in ("-t", "--tag") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--tag="):
            value = a.split("=", 1)[1]
        elif a.startswith("-t") and len(a) > 2:
            value = a[2:]
        if value is not None and "quick" in value:
            return True
    return False


def main(argv: list[str]) -> int:
    if argv[:1] == ["hugepages"]:
        return _hugepages()
    if argv[:1] == ["pick-cpus"] and len(argv) == 2:
        return _pick(argv[1])
    if argv[:1] == ["cores"]:
        return _cores()
    if argv[:1] == ["llc"]:
        print(llc_bytes())
        return 0
    if argv[:1] == ["stream-size"] and len(argv) in (3, 4, 5):
        given = parse_count(argv[3]) if len(argv) >= 4 and argv[3] else None
        most = _trials(argv[4], "trials") if len(argv) == 5 else None
        cap = parse_size(argv[2], "max_bytes_per_run")
        return _stream_size(_trials(argv[1], "quick_trials"), cap, given, most)
    if argv[:1] == ["latency-size"] and len(argv) == 2:
        return _latency_size(parse_size(argv[1], "max_working_set"))
    if argv[:1] == ["load"] and len(argv) >= 4 and argv[2] == "--":
        return _load(argv[1], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
