"""Reports on layers from a tuning database: a layer's program (:func:`liftpy.tuning.report.task_report`) with
Winograd's stages beside it, and a network's layers against the baselines (the paper's table 3, figure 5).
Each layer's program is the faster the database knows (:func:`liftpy.nn.conv.best_in_database`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..tuning.db import TuningDB
from ..tuning.report import pyplot, task_report
from . import winograd
from .conv import best_in_database, route_task
from .layers import NETWORKS, ConvLayer


def layer_report(db: TuningDB, layer: ConvLayer, device: str | None, out_dir: Path) -> str:
    """The report on the layer's direct program (in a database from before the hand-written pipelines were
    retired, on the layer's own trials), then :func:`winograd_report`."""
    task = route_task(layer)
    subject = task if db.trials(task, device) or not db.trials(layer, device) else layer
    return task_report(db, subject, device, out_dir) + winograd_report(db, layer, device)


def winograd_report(db: TuningDB, layer: ConvLayer, device: str | None) -> str:
    """For a layer Winograd's F(2x2, 3x3) computes: each stage's best and the program the layer runs, or that
    the stages are not tuned; else nothing. Read from the trials: nothing is lowered."""
    if not winograd.applies(layer):
        return ""
    best = db.best(winograd.winograd_task(layer), device)
    if best is None:
        return "\nWinograd's F(2x2, 3x3) (liftpy/nn/conv2d_winograd.lift): not tuned for this layer"
    stages = ", ".join(f"{stage.task.stage} {stage.time_ms:.3f} ms ({len(stage.trials)} trials"
                       f"{', once per layer' * stage.task.hoisted})" for stage in best.stages)
    runs = best_in_database(db, layer, device)
    timed = "timed whole" if best.whole is not None else "the stages' sum (not timed whole)"
    return (f"\nWinograd's F(2x2, 3x3) (liftpy/nn/conv2d_winograd.lift), tuned stage by stage: {best.time_ms:.3f} "
            f"ms a call, {timed} ({stages})\nthe layer runs the {runs.name} program ({runs.time_ms:.3f} ms)")


def network_report(db: TuningDB, network: str, device: str | None, out_dir: Path) -> str:
    """Per layer of the network: the program it runs, its time, rate and memory, against each baseline
    recorded (benchmarks/vgg16.py); a throughput figure beside the database."""
    if network not in NETWORKS:
        raise InputError(f"unknown network {network!r} (known: {', '.join(NETWORKS)})")
    rows = []
    baseline_names: list[str] = []

    for name, layer in NETWORKS[network].items():
        best = best_in_database(db, layer, device)
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
        line = (f"{name:9} {best.name:9} {best.time_ms:9.3f} {layer.flops / best.time_ms / 1e6:8.1f} "
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


def _throughput_figure(rows, baseline_names, path: Path):
    plt = pyplot()
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
