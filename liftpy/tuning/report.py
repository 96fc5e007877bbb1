"""Reports from a tuning database on one task: the best configurations (the paper's table 4) beside what the
device's cost model predicted for them, failures by cause and the Pareto front of time against memory (figure 6),
a PNG figure made with matplotlib. A network's layers against the baselines: :mod:`liftpy.nn.report`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LiftError
from .cost_model import DeviceModel, LearnedModel, kendall_tau, top_recall, traffic_lower_bound, window_reuse
from .db import TIED, Trial, TuningDB, ranked
from .features import current
from .measure import median, spread
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


def task_report(db: TuningDB, task, device: str | None, out_dir: Path, top: int = 10) -> str:
    """The best trials of a task (or, in a database from before the pipelines were retired, a layer: see
    :class:`~liftpy.tuning.db.Subject`), each with its predicted time and its traffic over the least a call can
    move (:class:`ModelView`), its failures by cause, and its Pareto figure; for a program task, its best
    low-level program in the language."""
    trials = db.trials(task, device)
    if not trials:
        return f"no trials for {task.describe()} in {db.path}"
    ok = ranked(trials)
    flops = getattr(task, "flops", None)
    lines = [f"{task.describe()}: {len(trials)} trials, {len(ok)} correct"]
    if ok:
        view = ModelView.of(db, task, ok)
        lines.append(f"{'rank':>4} {'time ms':>9} {'spread':>7} {'timed':>5} {'pred ms':>8} {'GFLOP/s':>8} {'MiB':>7} "
                     f"{'moved':>8} {'/bound':>6} {'algorithm':>9}  configuration")
        for rank, t in enumerate(ok[:top], 1):
            config = ", ".join(f"{k}={v}" for k, v in t.config.items())
            rate = f"{flops / t.time_ms / 1e6:8.1f}" if flops else f"{'-':>8}"
            timed = "again" if t.measured_again else "once"
            moved = f"{t.moved_bytes / 2**20:8.1f}" if t.moved_bytes is not None else f"{'-':>8}"
            spread_text = f"{spread(t.times_ms):7.0%}" if len(t.times_ms) > 1 else f"{'-':>7}"
            predicted, over = view.predicted_ms.get(id(t)), view.over_bound.get(id(t))
            predicted_text = f"{predicted:8.3f}" if predicted is not None else f"{'-':>8}"
            over_text = f"{over:6.1f}" if over is not None else f"{'-':>6}"
            lines.append(f"{rank:4} {t.time_ms:9.3f} {spread_text} {timed:>5} {predicted_text} {rate} "
                         f"{(t.memory_bytes or 0) / 2**20:7.1f} {moved} {over_text} {t.algorithm:>9}  {config}")
        lines.append("timed: again = measured again in turns with its rivals at the search's end (ranked first; "
                     f"of those within {TIED:.0%} of the fastest, one moving {TIED:.0%} fewer bytes goes before it), "
                     "once = its first median only")
        lines.append("time: the median of its timing rounds; spread: how far apart the middle half of them lie, over "
                     "that median (README, the measuring protocol)")
        lines.append("MiB: global memory allocated; moved: MiB a call's kernels ask of global memory "
                     "(liftpy.codegen.traffic)")
        lines += view.notes
    failures = Counter(t.status for t in trials if t.status != "ok")
    if failures:
        lines.append("failures by cause:")
        for status, count in failures.most_common():
            example = next(t for t in trials if t.status == status).cause.splitlines()[0][:120]
            lines.append(f"  {status:14} {count:5}   e.g. {example}")
    best = db.best(task, device) if ok and isinstance(task, ProgramTask) else None
    if best is not None:  # a program: the best low-level program, as the language writes it
        from ..pretty import pretty

        lines.append(f"the best low-level program ({best.time_ms:.3f} ms, {best.config}):")
        lines.append(pretty(best.program).rstrip())
    if ok:
        path = out_dir / f"pareto-{_file_name(task)}.png"
        _pareto_figure(ok, task, path)
        lines.append(f"wrote {path}")
    return "\n".join(lines)


@dataclass
class ModelView:
    """What the device's cost model says of a task's correct trials: each one's predicted time (by id of the
    trial) and its traffic over the least a call can move, with the lines that say how both were made."""

    predicted_ms: dict = field(default_factory=dict)
    over_bound: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @classmethod
    def of(cls, db: TuningDB, task, ok: list[Trial]) -> "ModelView":
        """The view of ``ok`` (a task's correct trials, ranked) on the device of the first: predicted by the
        device's model trained on its *other* tasks' trials only (what it would have said before this task was
        measured), the analytic model where there are too few; the traffic bound from the device's facts, where
        liftpy knows the device (a profile, or the live one)."""
        view = cls()
        device = ok[0].device
        mine = [t for t in ok if t.device == device and current(t.features)]
        if not mine:
            view.notes.append("pred ms, /bound: '-' -- the trials carry no features as this liftpy reads them (a "
                              "database from before they were recorded, or read otherwise)")
            return view
        others = [t for t in db.trials(device=device, status="ok") if t.task_key != task.key and current(t.features)]
        model = DeviceModel.of_trials(others)
        figures = model.predict([t.features for t in mine])
        scale = median([t.time_ms / f for t, f in zip(mine, figures) if f > 0] or [1.0])
        view.predicted_ms = {id(t): f * scale for t, f in zip(mine, figures)}
        learned = model.model.trained if isinstance(model.model, LearnedModel) else False
        source = (f"learned from {len(others)} trials of the device's {len({t.task_key for t in others})} other "
                  "tasks, none of this one's" if learned else
                  "the analytic model's (too few trials of the device's other tasks to learn from"
                  + ("" if LearnedModel.available() else ", or LightGBM not installed: the 'model' extra") + ")")
        measured = [t.time_ms for t in mine]
        agreement = f"Kendall's tau {kendall_tau(figures, measured):.2f} over its {len(mine)} correct trials"
        if len(mine) >= 20:
            found = round(top_recall(figures, measured) * 5)
            agreement += f", {found} of the 5 fastest measured among the 20 fastest predicted"
        view.notes.append(f"pred ms: the cost model's figure, {source}, scaled by the one factor that puts its "
                          f"median over this task's trials on the measured one; {agreement}")
        facts = device_facts(device)
        if facts is None:
            view.notes.append(f"/bound: '-' -- liftpy knows no facts of {device!r} (no profile, not this machine's)")
            return view
        bounds: dict = {}  # by updates: a few distinct counts (a rounded-up block makes more)
        for t in mine:
            updates = t.features.get("reduction_updates", 0.0)
            if updates not in bounds:
                bounds[updates] = traffic_lower_bound(task, updates, facts)
            moved = t.moved_bytes if t.moved_bytes is not None else \
                t.features.get("global_read_bytes", 0.0) + t.features.get("global_written_bytes", 0.0)
            if bounds[updates] > 0:
                view.over_bound[id(t)] = moved / bounds[updates]
        reuse = window_reuse(task)
        theorem = (f"or Zhang et al.'s bound (PPoPP'21) U / (4 sqrt(2 R S)) floats for its U multiply-adds, R = "
                   f"{reuse:g}, S = {facts.private_mem_budget + facts.local_mem_size // 4} floats (a work-item's "
                   "private budget and a group's local memory), whichever is more" if reuse is not None else
                   "(the convolution's bound needs the window's reuse, which this program does not say)")
        view.notes.append("/bound: moved over the fewest bytes a call can move: each input read "
                          f"and the output written once, {theorem}")
        return view


def device_facts(name: str):
    """The facts (:class:`~liftpy.device.Device`) of the device of that name: a shipped profile's, or this
    machine's device's; None where liftpy knows neither."""
    from ..params import target_profiles

    for profile in target_profiles().values():
        if profile.name == name:
            return profile
    try:
        from ..runtime import device_info, get_device

        facts = device_info(get_device(name))
    except (LiftError, ImportError):
        return None
    return facts if facts.name == name else None


def _file_name(subject) -> str:
    if isinstance(subject, ProgramTask):  # a program: its file's name and a hash of its key (sizes included:
        # every layer of conv2d.lift is the same program, and their figures went to one file)
        return f"{subject.name}-{hashlib.sha256(subject.key.encode()).hexdigest()[:12]}"
    return subject.name if "." in subject.name else subject.key.replace(" ", "_").replace(",", "-")


def pyplot():
    """matplotlib's pyplot, drawing to files only."""
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


def _pareto_figure(ok: list[Trial], subject, path: Path):
    plt = pyplot()
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
    ax.set_title(f"{subject.name}: time against memory")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
