"""Reports from a tuning database: the best configurations (the paper's table 4), failures by cause, the
Pareto front of time against memory (figure 6), and a network's layers against the baselines (table 3,
figure 5). Figures are PNG files made with matplotlib.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from ..nn.layers import NETWORKS
from .db import TIED, Trial, TuningDB, ranked
from .program import ROUTE, ProgramTask


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (lower is better), by time."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best_memory = [], float("inf")
    for i in order:
        if points[i][1] < best_memory:
            front.append(i)
            best_memory = points[i][1]
    return front


def layer_report(db: TuningDB, layer, device: str | None, out_dir: Path, top: int = 10) -> str:
    """The best trials of a subject (a layer, or a program: see :class:`liftpy.tuning.db.Subject`), its
    failures by cause, and its Pareto figure; for a program, the best low-level program in the language."""
    trials = db.trials(layer, device)
    if not trials:
        return f"no trials for {layer.describe()} in {db.path}"
    ok = ranked(trials)
    flops = getattr(layer, "flops", None)
    lines = [f"{layer.describe()}: {len(trials)} trials, {len(ok)} correct"]
    if ok:
        lines.append(f"{'rank':>4} {'time ms':>9} {'timed':>5} {'GFLOP/s':>8} {'MiB':>7} {'moved':>8} "
                     f"{'algorithm':>9}  configuration")
        for rank, t in enumerate(ok[:top], 1):
            config = ", ".join(f"{k}={v}" for k, v in t.config.items())
            rate = f"{flops / t.time_ms / 1e6:8.1f}" if flops else f"{'-':>8}"
            timed = "again" if t.measured_again else "once"
            moved = f"{t.moved_bytes / 2**20:8.1f}" if t.moved_bytes is not None else f"{'-':>8}"
            lines.append(f"{rank:4} {t.time_ms:9.3f} {timed:>5} {rate} "
                         f"{(t.memory_bytes or 0) / 2**20:7.1f} {moved} {t.algorithm:>9}  {config}")
        lines.append("timed: again = measured again in turns with its rivals at the search's end (ranked first; "
                     f"of those within {TIED:.0%} of the fastest, one moving {TIED:.0%} fewer bytes goes before it), "
                     "once = its first median only")
        lines.append("MiB: global memory allocated; moved: MiB a call's kernels ask of global memory "
                     "(liftpy.codegen.traffic)")
    failures = Counter(t.status for t in trials if t.status != "ok")
    if failures:
        lines.append("failures by cause:")
        for status, count in failures.most_common():
            example = next(t for t in trials if t.status == status).cause.splitlines()[0][:120]
            lines.append(f"  {status:14} {count:5}   e.g. {example}")
    if ok and isinstance(layer, ProgramTask):  # a program: the best low-level program, as the language writes it
        from ..pretty import pretty
        from .search import best_of

        best = best_of(layer, ok)
        lines.append(f"the best low-level program ({best.time_ms:.3f} ms, {best.config}):")
        lines.append(pretty(best.program).rstrip())
    if ok:
        path = out_dir / f"pareto-{_file_name(layer)}.png"
        _pareto_figure(ok, layer, path)
        lines.append(f"wrote {path}")
    return "\n".join(lines)


def winograd_report(db: TuningDB, layer, device: str | None) -> str:
    """For a layer Winograd's F(2x2, 3x3) computes and whose stages are tuned: each stage's best and what the
    layer runs (the faster program, :func:`liftpy.nn.conv.best_in_database`); else nothing. Read from the
    trials: nothing is lowered."""
    from ..nn import winograd
    from ..nn.conv import best_in_database, winograd_stage_bests
    from .search import per_call_ms

    if not winograd.applies(layer):
        return ""
    bests = winograd_stage_bests(db, layer, device)
    if bests is None:
        return "\nWinograd's F(2x2, 3x3) (liftpy/nn/conv2d_winograd.lift): not tuned for this layer"
    stages = ", ".join(f"{stage.stage} {t.time_ms:.3f} ms ({len(db.trials(stage, device))} trials"
                       f"{', once per layer' * stage.hoisted})" for stage, t in bests.items())
    per_call = per_call_ms((stage, t.time_ms) for stage, t in bests.items())
    runs = best_in_database(db, layer, device)
    return (f"\nWinograd's F(2x2, 3x3) (liftpy/nn/conv2d_winograd.lift), tuned stage by stage: {per_call:.3f} ms "
            f"a call ({stages})\nthe layer runs the {runs.algorithm} program ({runs.time_ms:.3f} ms)")


def network_report(db: TuningDB, network: str, device: str | None, out_dir: Path) -> str:
    from ..errors import InputError
    from ..nn.conv import best_in_database

    if network not in NETWORKS:
        raise InputError(f"unknown network {network!r} (known: {', '.join(NETWORKS)})")
    rows = []
    baseline_names: list[str] = []

    for name, layer in NETWORKS[network].items():
        best = best_in_database(db, layer, device)  # the faster program the layer runs: direct or Winograd's
        baselines = db.baselines(layer, best.device if best else device or "")
        for b in baselines:
            if b not in baseline_names:
                baseline_names.append(b)
        rows.append((name, layer, best, baselines))
    width = {b: max(14, len(b) + 3) for b in baseline_names}
    header = f"{'layer':9} {'program':9} {'best ms':>9} {'GFLOP/s':>8} {'MiB':>7}" + "".join(
        f" {b + ' ms':>{width[b]}} {'x':>6}" for b in baseline_names)
    lines = [header]
    total = 0.0
    totals = {b: 0.0 for b in baseline_names}
    for name, layer, best, baselines in rows:
        if best is None:
            lines.append(f"{name:9} {'(not tuned)':>19}")
            continue
        total += best.time_ms
        line = (f"{name:9} {best.algorithm:9} {best.time_ms:9.3f} {layer.flops / best.time_ms / 1e6:8.1f} "
                f"{best.memory_bytes / 2**20:7.1f}")
        for b in baseline_names:
            if b in baselines:
                ms = baselines[b][0]
                totals[b] += ms
                line += f" {ms:{width[b]}.3f} {ms / best.time_ms:6.2f}"
            else:
                line += f" {'-':>{width[b]}} {'':6}"
        lines.append(line)
    lines.append(f"{'total':9} {'':9} {total:9.3f}" + " " * 17 + "".join(
        f" {totals[b]:{width[b]}.3f} {totals[b] / total if total else 0:6.2f}" for b in baseline_names))
    lines.append("program: the faster the database knows (direct, or Winograd's F(2x2, 3x3) where it applies); "
                 "best ms: its best configuration's kernel events (tuning database; Winograd's: its stages run on "
                 "every call); GFLOP/s: the direct sum's count, for both; other columns as recorded "
                 "(benchmarks/vgg16.py records whole calls, numpy in and numpy out, and '(kernels)' baselines' kernel "
                 "events); x = column / best")
    tuned = [(name, layer, best, baselines) for name, layer, best, baselines in rows if best is not None]
    if tuned:
        path = out_dir / f"throughput-{network}.png"
        _throughput_figure(tuned, baseline_names, path)
        lines.append(f"wrote {path}")
    return "\n".join(lines)


def _file_name(layer) -> str:
    if isinstance(layer, ProgramTask):  # a program: its file's name and a hash of its key (sizes included:
        # every layer of conv2d.lift is the same program, and their figures went to one file)
        return f"{layer.name}-{hashlib.sha256(layer.key.encode()).hexdigest()[:12]}"
    return layer.name if "." in layer.name else layer.key.replace(" ", "_").replace(",", "-")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: how a route's trial reads the padding (its ``pad_copy``), the choice that moves it along the memory axis
PADDING_READS = {0: "padding read through the view", 1: "padding copied", 2: "padding copied rotated",
                 3: "padding view, branch-free"}


def _group(t: Trial, by_padding: bool) -> str:
    """A trial's colour in the figure: for the route, a sum whose chunks' sums go to memory (the paper's two
    kernels: the memory end of its figure 6), else how it reads the padding ``by_padding`` (where the program
    pads: the copy costs memory, the view tests at each read), else the levels it blocks; a pipeline of a
    database written before they were retired, its name."""
    if t.algorithm != ROUTE:
        return t.algorithm
    if t.config.get("chunk"):
        return "chunks' sums in memory"
    if by_padding:
        return PADDING_READS.get(t.config.get("pad_copy", 0), f"pad_copy {t.config.get('pad_copy')}")
    blocked = [k.split(".", 1)[1] for k, v in t.config.items() if k.startswith("block.") and v > 1]
    return "blocks " + " x ".join(blocked) if blocked else "no block"


def _pareto_figure(ok: list[Trial], layer, path: Path):
    plt = _pyplot()
    points = [(t.time_ms, (t.memory_bytes or 0) / 2**20) for t in ok]
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=120)
    by_padding = len({t.config.get("pad_copy", 0) for t in ok if t.algorithm == ROUTE}) > 1  # the program pads
    for group in dict.fromkeys(_group(t, by_padding) for t in ok):  # one colour per group
        mine = [p for p, t in zip(points, ok) if _group(t, by_padding) == group]
        ax.scatter([p[0] for p in mine], [p[1] for p in mine], s=10, alpha=0.5, label=group)
    fx = [points[i][0] for i in front]
    fy = [points[i][1] for i in front]
    ax.step(fx, fy, where="post", color="crimson", label="Pareto front")
    ax.scatter(fx, fy, s=24, color="crimson")
    ax.set_xscale("log")
    memory = [p[1] for p in points if p[1] > 0]
    if memory and max(memory) > 10 * min(memory):  # a split sum's chunks' sums: up to hundreds of times the least
        ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("kernel time (ms, log scale)")
    ax.set_ylabel("memory (MiB)")
    ax.set_title(f"{layer.name}: time against memory")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _throughput_figure(rows, baseline_names, path: Path):
    plt = _pyplot()
    import numpy as np

    names = [r[0] for r in rows]
    series = {"liftpy (tuning database: kernel events)": [r[1].flops / r[2].time_ms / 1e6 for r in rows]}
    for b in baseline_names:
        series[b] = [r[1].flops / r[3][b][0] / 1e6 if b in r[3] else 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    width = 0.8 / len(series)
    x = np.arange(len(names))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(x + i * width, values, width, label=label)
    ax.set_xticks(x + width * (len(series) - 1) / 2, names, rotation=30)
    ax.set_ylabel("GFLOP/s")
    ax.set_title("throughput per layer")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
