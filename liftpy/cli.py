"""The ``liftpy`` command line.

Every user mistake ends as one ``file:line:col: error: message`` line (with the source line and a caret when
there is one) and exit status 1; a Python traceback means a bug in liftpy. That holds for the command line
itself too: argparse's own complaints (an unknown option, a value of the wrong kind) are raised as
:class:`InputError` by :class:`Parser` and reported by :func:`main` like every other mistake, and the numeric
options are read by :func:`positive_int`, :func:`nonnegative_int` and :func:`positive_seconds`, so a bad value
is refused, with the option named, before any work starts.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from .errors import InputError, InternalError, LiftError
from .interpreter import random_inputs


# ------------------------------------------------------------------------------------------------ arguments
class Parser(argparse.ArgumentParser):
    """argparse's parser, except that a mistake on the command line raises :class:`InputError` (argparse
    prints a usage block and exits 2): main() reports it as one ``error:`` line and exits 1, as it does every
    other mistake. Subcommands' parsers are made of the same class (add_subparsers passes it on)."""

    def error(self, message: str):
        raise InputError(f"{message} (see `{self.prog} --help`)")

    def parse_args(self, args=None, namespace=None):
        # argparse leaves words no subcommand knows to the top parser; name the subcommand's help instead
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = " ".join(filter(None, (self.prog, getattr(parsed, "command", None))))
            raise InputError(f"unrecognized arguments: {' '.join(extra)} (see `{command} --help`)")
        return parsed


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (a count of runs, trials, images)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """An argparse type: an integer of at least 0 (a seed, a number of things to show)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


@contextmanager
def writing(option: str, value, hint: str = "") -> Iterator[None]:
    """Within the block, an OSError (a missing or unwritable directory, a file where a directory should be)
    becomes an InputError naming the option, its value, the file when it is another, and the reason."""
    try:
        yield
    except BrokenPipeError:
        raise  # stdout closed by the reader (``| head``): main() ends quietly
    except OSError as e:
        reason = "it exists and is not a directory" if isinstance(e, FileExistsError) else e.strerror or str(e)
        where = f" {e.filename}" if e.filename is not None and str(e.filename) != str(value) else ""
        raise InputError(f"{option} {value}: cannot write{where} ({reason}){hint}") from None


# ------------------------------------------------------------------------------------------------ helpers
def parse_sizes(items: Sequence[str] | None) -> dict[str, object]:
    """``--size n=8 --size padSize=1,1,0,0`` -> {"n": 8, "padSize": (1, 1, 0, 0)}; a size given twice, or past
    64 bits, is refused."""
    sizes: dict[str, object] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"--size expects NAME=VALUE, got {item!r}")
        try:
            values = tuple(int(v) for v in value.split(","))
        except ValueError:
            raise InputError(f"--size {name}: expected an integer (or integers separated by commas), got {value!r}") from None
        huge = [v for v in values if not -2**63 <= v < 2**63]
        if huge:
            raise InputError(f"--size {name}: {huge[0]} is not a machine integer "
                             f"(sizes are 64-bit, at most {2**63 - 1})")
        name = name.strip()
        if name in sizes:
            raise InputError(f"--size {name} given twice ({_size_value(sizes[name])} and {value}); give each size once")
        sizes[name] = values[0] if len(values) == 1 else values
    return sizes


def _size_value(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def program_sizes(program, items: Sequence[str] | None) -> dict[str, object]:
    """:func:`parse_sizes`, each name checked against the sizes the program has (its parameters' array lengths,
    its int parameters, its tuning parameters): a misspelt size would otherwise be ignored without a word."""
    sizes = parse_sizes(items)
    known = set(program.tuning_params)
    for fun in program.functions:
        known.update(fun.inferred_names)
        for p in fun.params:
            known.update(p.type.size_names())
            if p.is_size:
                known.add(p.name)
    for name in sizes:
        if name not in known:
            have = f"its sizes: {', '.join(sorted(known))}" if known else "it has none"
            raise InputError(f"--size {name}: {program.filename} has no size {name!r} ({have})")
    return sizes


def load_inputs(items: Sequence[str] | None) -> dict[str, np.ndarray]:
    """``--input x=x.npy`` -> {"x": array}."""
    inputs = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input expects NAME=FILE.npy, got {item!r}")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise InputError(f"--input {name}: {path}: no such file") from None
        except OSError as e:
            raise InputError(f"--input {name}: {path}: cannot read ({e.strerror or e})") from None
        except ValueError as e:
            # without a .npy header numpy takes the file for a pickle, which it is told not to load
            detail = "" if "pickled" in str(e) else f" ({e})"
            raise InputError(f"--input {name}: {path}: not a .npy file{detail}") from None
    return inputs


# ------------------------------------------------------------------------------------------------ commands
def cmd_check(args) -> int:
    from . import load

    program = load(args.file)
    sizes = program_sizes(program, args.size)
    for line in check_report(program, sizes):
        print(line)
    if args.nests:
        from .rewrite.nests import loop_nests

        for i, nest in enumerate(loop_nests(program, args.function, sizes), 1):
            print(f"loops {i}: {nest.describe()}")
    return 0


def check_report(program, sizes) -> list[str]:
    """What ``liftpy check`` prints for a program: each function's inferred type and the size constraints
    (the fuzzer of tests/test_fuzz.py runs mutants through this without writing files)."""
    from .typecheck import typecheck

    typed = typecheck(program, sizes)
    lines = []
    if program.tuning_params:
        lines.append(f"tuning parameters: {', '.join(program.tuning_params)}")
    for fun in typed.program.functions:
        lines.append(f"{fun.name} : {typed.function_types[fun.name]}")
        for name, value in typed.result_bindings.get(fun.name, {}).items():
            lines.append(f"  where {name} = {value}")
    if typed.constraints:
        lines.append("requires:")
        for c in typed.constraints:
            lines.append(f"  {c.text:40}  ({c.reason}; {c.span})")
    return lines


def cmd_print(args) -> int:
    from . import load, pretty

    print(pretty(load(args.file)), end="")
    return 0


def cmd_eval(args) -> int:
    from . import evaluate, load

    program = load(args.file)
    sizes = program_sizes(program, args.size)
    inputs = load_inputs(args.input)
    fun = program.function(args.function)
    if args.random is not None:
        inputs = random_inputs(program, sizes, args.random, fun.name, inputs)
    result = evaluate(program, inputs, sizes, function=args.function)
    if isinstance(result, tuple):
        raise InputError("the result is a tuple; liftpy eval writes single arrays (use the Python API)")
    if args.output:
        path = save_array(args.output, result, fun.name)
        print(f"wrote {path}: shape {result.shape}, {result.dtype}")
    else:
        with np.printoptions(precision=4, threshold=200, edgeitems=3, suppress=True):
            print(f"shape {result.shape}, {result.dtype}")
            print(result)
    return 0


def save_array(output: str, array: np.ndarray, name: str) -> str:
    """Write ``array`` to the .npy file ``output`` (np.save's rule: the suffix added when missing), or, where
    ``output`` is a directory (or ends with a slash), to ``name``.npy in it; the path written."""
    if Path(output).is_dir() or output.endswith(("/", os.sep)):
        path = str(Path(output) / f"{name}.npy")
    else:
        path = output if output.endswith(".npy") else output + ".npy"
    with writing("-o", output):
        np.save(path, array)
    return path


def cmd_compile(args) -> int:
    from . import load
    from .codegen.host import write_program

    program = load(args.file)
    sizes = program_sizes(program, args.size)
    if args.target:  # a device profile: the kernels are generated for it, offline, with no OpenCL here
        from .codegen.program import generate
        from .params import target_profiles

        profiles = target_profiles()
        if args.target not in profiles:
            raise InputError(f"unknown target profile {args.target!r} (profiles: {', '.join(profiles)})")
        if args.device:
            raise InputError("give --target or --device, not both")
        generated = generate(program, sizes, args.function, device=profiles[args.target])
    else:
        from .runtime import compile as compile_program

        generated = compile_program(program, sizes, device=args.device, function=args.function).generated
    with writing("-o", args.output):
        written = write_program(generated, args.output)
    for path in written:
        print(f"wrote {path}")
    for name, (global_size, local_size) in generated.launch.items():
        print(f"  {name}: global {global_size}, local {local_size}")
    if args.show_ir:
        from .codegen.kir import format_kernel

        for kernel in generated.kernels:
            print()
            print(format_kernel(kernel.ir))
    return 0


def cmd_run(args) -> int:
    from . import evaluate, load
    from .runtime import compile as compile_program
    from .tuning.program import kinds_differ

    program = load(args.file)
    sizes = program_sizes(program, args.size)
    exe = compile_program(program, sizes, device=args.device, function=args.function)
    fun = program.function(args.function)
    inputs = random_inputs(program, sizes, args.seed, fun.name, load_inputs(args.input))
    result = exe.run(inputs, repeat=args.repeat, warmup=1, poison=True)  # unwritten elements stay NaN
    reference = evaluate(program, inputs, sizes, function=args.function)
    # NaN and infinity are data: compared by kind (kinds_differ), the numbers within the tolerance
    wrong = kinds_differ(result.output, reference)
    finite = np.isfinite(reference) & ~wrong
    got, expected = np.asarray(result.output)[finite], np.asarray(reference)[finite]
    error = float(np.max(np.abs(got - expected), initial=0.0))
    scale = float(np.max(np.abs(expected), initial=0.0))
    print(f"device: {exe.device.name.strip()}")
    for name, ms in result.per_kernel_ms.items():
        print(f"  {name}: {ms:.4f} ms")
    print(f"kernel time: {result.kernel_ms:.4f} ms (median of {args.repeat})")
    print(f"max error against the interpreter: {error:.3g} (largest value {scale:.3g})")
    if wrong.any():
        where = tuple(int(i) for i in np.argwhere(wrong)[0])
        more = f" (and {int(wrong.sum()) - 1} more)" if wrong.sum() > 1 else ""
        print(f"error: the kernel's output differs from the interpreter's: output[{', '.join(map(str, where))}] is "
              f"{result.output[where]} where the interpreter has {reference[where]}{more}", file=sys.stderr)
        return 1
    if not np.allclose(got, expected, rtol=1e-4, atol=1e-4 * max(scale, 1.0)):
        print("error: the kernel's output differs from the interpreter's", file=sys.stderr)
        return 1
    if args.output:
        print(f"wrote {save_array(args.output, result.output, fun.name)}")
    return 0


def cmd_params(args) -> int:
    from . import load
    from .params import parameters

    from .params import target_profiles

    if args.target and args.target not in target_profiles():
        raise InputError(f"unknown target profile {args.target!r} (profiles: {', '.join(target_profiles())})")
    program = load(args.file)
    space = parameters(program, program_sizes(program, args.size), device=args.target or args.device,
                       function=args.function)
    for spec in args.require or ():
        name, _, condition = spec.partition(":")
        if not condition:
            raise InputError(f"--require expects NAME:CONDITION, got {spec!r}")
        space.require(name.strip(), condition.strip())
    print(space.describe())
    if not space.satisfiable():
        print("no configuration is valid; the conflicting constraints are:")
        for c in space.explain_unsat():
            print(f"  {c}")
        return 1
    print(f"valid configurations: {space.count()}")
    if args.sample:
        names = [p.name for p in space.parameters]
        print("sample:")
        for config in space.sample(args.sample, seed=args.seed):
            print("  " + ", ".join(f"{k}={config[k]}" for k in names))
    return 0


def _shape(text: str, what: str, count: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        values = ()
    if len(values) != count:
        raise InputError(f"--{what} expects {'x'.join(['N'] * count)}, got {text!r}")
    return values


def cmd_conv(args) -> int:
    from .codegen.host import write_program
    from .nn import conv as nnconv

    layer = _layer_from_args(args)
    config = None
    if args.config:
        config = {}
        for item in args.config:
            name, sep, value = item.partition("=")
            if not sep:
                raise InputError(f"--config expects NAME=VALUE, got {item!r}")
            try:
                config[name.strip()] = int(value)
            except ValueError:
                raise InputError(f"--config {name}: expected an integer, got {value!r}") from None
    if args.output:
        with writing("-o", args.output):  # made before the run: a bad -o is refused at once
            Path(args.output).mkdir(parents=True, exist_ok=True)
    plan = nnconv.plan(layer, config, device=args.device)
    x, w, b = layer.random_inputs(args.seed)
    result = plan.run(x, w, b, repeat=args.repeat, warmup=1, check=True)
    print(layer.describe() + f", batch {layer.batch}")
    print(f"automatic route, configuration {plan.config}, device {plan.executable.device.name.strip()}")
    for stage, ms in result.stage_ms.items():
        print(f"  {stage:10} {ms:9.3f} ms")
    print(f"total kernel time {result.kernel_ms:.3f} ms (median of {args.repeat}), "
          f"{result.gflops(layer):.1f} GFLOP/s")
    print(f"memory: {plan.memory_bytes / 2**20:.1f} MiB (im2col + GEMM: {plan.im2col_bytes / 2**20:.1f} MiB, "
          f"x{plan.im2col_bytes / plan.memory_bytes:.2f})")
    print(f"checked against the float64 reference (output filled with NaN first): largest error "
          f"{result.max_error:.2e} of the float32 tolerance")
    if args.output:
        with writing("-o", args.output):
            written = write_program(plan.executable.generated, args.output)
            notes = Path(args.output) / "README.txt"
            notes.write_text(nnconv.export_notes(plan))
        for path in [*written, notes]:
            print(f"wrote {path}")
    return 0


def _layer_from_args(args):
    from .nn import conv as nnconv
    from .nn.layers import layer as named_layer

    if args.layer:
        layer = named_layer(args.layer)
        if getattr(args, "batch", 1) != 1:
            import dataclasses

            layer = dataclasses.replace(layer, batch=args.batch)
        return layer
    if not args.input or not args.kernels:
        raise InputError("give --layer NAME, or --input CxHxW and --kernels KxKHxKW")
    stride = _shape(args.stride, "stride", 1) * 2 if "x" not in args.stride else _shape(args.stride, "stride", 2)
    try:
        padding = [int(p) for p in args.padding.split(",")]
    except ValueError:
        padding = []
    if len(padding) not in (1, 4):
        raise InputError(f"--padding expects an int or top,bottom,left,right, got {args.padding!r}")
    dilation = _shape(args.dilation, "dilation", 1) * 2 if "x" not in args.dilation \
        else _shape(args.dilation, "dilation", 2)
    return nnconv.make_layer(_shape(args.input, "input", 3), _shape(args.kernels, "kernels", 3), stride,
                             padding[0] if len(padding) == 1 else padding, batch=getattr(args, "batch", 1),
                             dilation=dilation, groups=args.groups)


def _program_task(args, option: str):
    """The program a tuning command names (``liftpy tune FILE``, ``--program FILE``) at its --size values; a
    layer's options beside it are refused (one subject per command)."""
    from . import load
    from .tuning.program import ProgramTask

    path = getattr(args, option)
    given = [f"--{name}" for name in ("layer", "input", "kernels") if getattr(args, name, None)]
    if given:
        raise InputError(f"{' and '.join(given)}: a convolution layer's options, but a program file was given "
                         f"({path}); tune one or the other")
    program = load(path)
    return ProgramTask.make(path, program_sizes(program, args.size), args.function, tuple(args.constant or ()))


def cmd_tune(args) -> int:
    if args.file:
        if args.algorithm is not None:
            raise InputError(f"--algorithm {args.algorithm}: it chooses among a layer's programs; "
                             f"{args.file} is tuned as it is written")
        return _tune_program(args)
    return _tune_layer(args, _layer_from_args(args))


def _tune_layer(args, layer) -> int:
    """A layer's programs (:func:`liftpy.nn.conv.layer_tasks`) tuned with one budget; liftpy.nn finds the
    faster in the database."""
    from .nn.conv import WINOGRAD, layer_tasks, tune_layers

    algorithm = args.algorithm or "auto"
    tasks = layer_tasks(layer, algorithm)
    runner = _prepare_tuning(args, [task for _, task in tasks], f"{layer.describe()} through the automatic route")
    try:
        best = tune_layers([layer], args.trials, args.db, args.device, args.seed, algorithm,
                           **_tuning_options(args, runner))[0]
    finally:
        if runner is not None:
            runner.close()
    _count_trials(args, best)
    rate = layer.flops / best.time_ms / 1e6
    algorithm = "Winograd's F(2x2, 3x3)" if best.name == WINOGRAD else "the direct program"
    print(f"best through the automatic route: {algorithm}, {best.time_ms:.3f} ms ({rate:.1f} GFLOP/s), "
          f"{best.memory_bytes / 2**20:.1f} MiB, {best.config}")
    return 0


def _tune_program(args) -> int:
    from .pretty import pretty
    from .tuning import tune_task

    task = _program_task(args, "file")
    runner = _prepare_tuning(args, [task], task.describe())
    try:
        best = tune_task(task, args.trials, args.db, args.device, args.seed, **_tuning_options(args, runner))
    finally:
        if runner is not None:
            runner.close()
    _count_trials(args, best)
    print(f"best: {best.time_ms:.3f} ms (kernel events), {best.config}")
    print(pretty(best.program).rstrip())
    return 0


def _prepare_tuning(args, tasks, what: str):
    """Everything a user can get wrong -- the device, the cluster, the database, trials that cannot fit --
    refused first, before the line announcing the search; the Ray runner where ``--ray`` is given (else None:
    the tuner's local runner)."""
    from .runtime import get_device

    runner = None
    if args.ray:
        from .tuning.distributed import RayRunner

        runner = RayRunner(args.ray, device=args.device, timeout=args.timeout)
    else:
        get_device(args.device)
        for task in tasks:
            task.check_memory(args.device)  # trials that cannot fit: refused before the search is announced
    try:
        database = _tuning_db(args.db, create=True)  # damaged, unwritable: refused here, before any trial
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    database.close()
    if database.recovered:  # what a failed write of an earlier run kept aside (TuningDB.record), stored now
        print(f"stored {database.recovered} measurements kept in {database.recovery_path}", file=sys.stderr)
    if args.search == "model":
        from .tuning.cost_model import LearnedModel

        if not LearnedModel.available():
            print("the model search ranks by the analytic model alone: LightGBM, which learns this device's, is not "
                  "installed (pip install -e .[model])", file=sys.stderr)
    where = runner.describe() if runner is not None else \
        f"the {'default device' if args.device is None else args.device}"
    print(f"tuning {what} on {where}, {args.trials} trials, database {args.db}", file=sys.stderr)
    return runner


def _tuning_options(args, runner) -> dict:
    return dict(repeat=args.repeat, timeout=args.timeout, batch=args.trials_per_batch, runner=runner,
                strategy=args.search)


def _count_trials(args, best) -> None:
    ok = [t for t in best.trials if t.status == "ok"]
    print(f"{len(best.trials)} trials in {args.db}: {len(ok)} correct, {len(best.trials) - len(ok)} failed")


def _tuning_db(path, create: bool = False):
    """The tuning database at ``--db path``: opened to write (made if missing, migrated) when ``create``, else
    only read (an older schema read as it is)."""
    from .tuning.db import TuningDB

    if Path(path).is_dir():
        raise InputError(f"--db {path}: is a directory, not a tuning database")
    if not create and not Path(path).exists():
        raise InputError(f"--db {path}: no such tuning database (make one with liftpy tune)")
    if Path(path).parent.exists() and not Path(path).parent.is_dir():  # sqlite would only say "unable to open"
        raise InputError(f"--db {path}: {Path(path).parent} is not a directory")
    with writing("--db", path):  # TuningDB makes the missing directories of a new database
        try:
            return TuningDB(path, readonly=not create)
        except InputError as e:  # TuningDB's own (not a database, another schema) names the path and why
            raise InputError(f"--db {e.message}") from None


def cmd_report(args) -> int:
    from .nn.report import layer_report, network_report
    from .tuning.report import task_report

    if args.program and args.network:
        raise InputError("--program and --network: report one or the other")
    task = _program_task(args, "program") if args.program else None
    layer = None if args.program or args.network else _layer_from_args(args)
    db = _tuning_db(args.db)
    out_dir = Path(args.output) if args.output else Path(args.db).resolve().parent
    # the figures are the only files a report writes; by default they go beside the database
    with writing(*(("-o", args.output) if args.output else
                   ("--db", args.db, "; choose a directory for the figures with -o"))):
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.network:
            text = network_report(db, args.network, args.device, out_dir)
        elif layer is not None:
            text = layer_report(db, layer, args.device, out_dir)
        else:
            text = task_report(db, task, args.device, out_dir)
    print(text)
    return 0


def cmd_export(args) -> int:

    from .codegen.host import write_program

    if args.program:
        return _export_program(args, write_program)
    from .nn import conv as nnconv

    layer = _layer_from_args(args)
    db = _tuning_db(args.db)
    best = nnconv.best_in_database(db, layer, args.device)  # the direct program's or Winograd's, the faster
    if best is None:
        raise InputError(f"{args.db} has no correct trial for {layer.describe()} (tune it with liftpy tune --layer, "
                         f"or its shape's options)")
    plan = nnconv.plan(layer, best.config, algorithm=best.name)
    notes = Path(args.output) / "README.txt"
    with writing("-o", args.output):
        written = write_program(plan.executable.generated, args.output)
        notes.write_text(nnconv.export_notes(plan, best))
        if best.name == nnconv.WINOGRAD:  # the transforms are inputs of its kernels
            import numpy as np

            from .nn.winograd import transforms

            for name, matrix in transforms().items():
                np.save(Path(args.output) / f"{name}.npy", matrix)
                written.append(Path(args.output) / f"{name}.npy")
    for path in written + [notes]:
        print(f"wrote {path}")
    return 0


def _export_program(args, write_program) -> int:
    from .pretty import pretty
    from .runtime import compile as compile_program

    task = _program_task(args, "program")
    db = _tuning_db(args.db)
    best = db.best(task, args.device)  # a program tuned stage by stage: its stages' best, joined
    if best is None:
        stage = next(s for s in task.stages() if db.best(s, args.device) is None)
        raise InputError(f"{args.db} has no correct trial for {stage.describe()} (tune it with liftpy tune "
                         f"{task.path} --size ...)")
    executable = compile_program(best.program, task.size_map, args.device, task.function)
    out = Path(args.output)
    with writing("-o", args.output):
        written = write_program(executable.generated, args.output)
        (out / "best.lift").write_text(pretty(best.program))
        (out / "README.txt").write_text(
            f"The best low-level program found for {task.describe()} by the automatic route\n"
            f"(liftpy tune, database {args.db}): {best.time_ms:.3f} ms of kernel events on "
            f"{best.device}.\n"
            f"configuration: {best.config}\n"
            f"best.lift: the low-level program; the .cl files: its kernels; host.py runs them.\n")
        written += [out / "best.lift", out / "README.txt"]
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_onnx(args) -> int:
    """An ONNX model read into a network: described; with --tune its distinct tasks tuned with one budget; with
    --report run on random inputs and timed per step; with --export its kernels and a host script written."""
    from . import onnx as onnx_import

    net = onnx_import.load(args.model, batch=args.batch)
    print(net.describe())
    if args.trials:
        groups = net.groups()
        tasks = [task for programs, _ in groups for _, task in programs]
        runner = _prepare_tuning(args, tasks, f"{net.name}'s {len(groups)} distinct tasks ({len(tasks)} programs)")
        try:
            net.tune(args.trials, args.db, args.device, args.seed, **_tuning_options(args, runner))
        finally:
            if runner is not None:
                runner.close()
    if args.report or args.export:
        prepared = net.prepare(args.device, args.db)
        if args.report:
            rng = np.random.default_rng(args.seed)
            feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in net.inputs.items()}
            print("\n".join(prepared.report(feeds, args.repeat)))
        if args.export:
            with writing("--export", args.export):
                written = prepared.export(args.export)
            print(f"wrote {len(written)} files to {args.export}: {', '.join(sorted(p.name for p in written))}")
    return 0


def cmd_devices(args) -> int:
    from .runtime import get_device, list_devices

    default = get_device()
    for info in list_devices():
        mark = "  (default)" if info.name == default.name.strip() else ""
        print(info.describe() + mark)
    return 0


# ------------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="liftpy", description="Lift-style array programs compiled to OpenCL.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_: str, fn):
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        return p

    p = add("check", "parse and type-check a .lift file; print each function's type", cmd_check)
    p.add_argument("file")
    p.add_argument("--size", action="append", metavar="NAME=VALUE", help="bind a size (repeatable)")
    p.add_argument("--nests", action="store_true",
                   help="also print the function's loop nests: its spatial maps and reductions")
    p.add_argument("--function", help="the function whose nests to print (default: the last one in the file)")

    p = add("print", "print a .lift file back after parsing (macros expanded)", cmd_print)
    p.add_argument("file")

    p = add("eval", "evaluate a program with the reference interpreter", cmd_eval)
    p.add_argument("file")
    p.add_argument("--function", help="the function to run (default: the last one in the file)")
    p.add_argument("--size", action="append", metavar="NAME=VALUE", help="bind a size (repeatable)")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input array (repeatable)")
    p.add_argument("--random", type=nonnegative_int, metavar="SEED", help="make random inputs for those not given")
    p.add_argument("-o", "--output", help="write the result to this .npy file (a directory: FUNCTION.npy in it)")

    p = add("compile", "generate OpenCL kernels and a standalone host script", cmd_compile)
    p.add_argument("file")
    p.add_argument("--function", help="the function to compile (default: the last one in the file)")
    p.add_argument("--size", action="append", metavar="NAME=VALUE", help="bind a size (repeatable)")
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring (default: PYOPENCL_CTX, "
                                    "else the first GPU, else the CPU)")
    p.add_argument("-o", "--output", default="out", help="directory for the .cl files and host.py (default: out)")
    p.add_argument("--show-ir", action="store_true",
                   help="also print each kernel in the kernel IR, as the code generator's passes left it")
    p.add_argument("--target", help="generate for a device profile instead of a live device, offline: "
                                    "mali-g72, pocl-cpu, nvidia-gtx1080")

    p = add("run", "compile, run on the device, and compare with the interpreter", cmd_run)
    p.add_argument("file")
    p.add_argument("--function", help="the function to run (default: the last one in the file)")
    p.add_argument("--size", action="append", metavar="NAME=VALUE", help="bind a size (repeatable)")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input array (others are random)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed for random inputs")
    p.add_argument("--repeat", type=positive_int, default=5, help="timed runs (the median is reported)")
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring")
    p.add_argument("-o", "--output",
                   help="write the kernel's result to this .npy file (a directory: FUNCTION.npy in it)")

    p = add("params", "the tuning parameters of a program: constraints, count, samples", cmd_params)
    p.add_argument("file")
    p.add_argument("--function", help="the function (default: the last one in the file)")
    p.add_argument("--size", action="append", metavar="NAME=VALUE", help="bind a size (repeatable)")
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring (default device otherwise)")
    p.add_argument("--target", help="a device profile instead of a live device: mali-g72, pocl-cpu, nvidia-gtx1080")
    p.add_argument("--require", action="append", metavar="NAME:CONDITION", help="add a constraint, e.g. 'v4:v == 4'")
    p.add_argument("--sample", type=nonnegative_int, default=0, metavar="N", help="print N random valid configurations")
    p.add_argument("--seed", type=nonnegative_int, default=0)

    def layer_options(p, db: bool = True):
        p.add_argument("--layer", help="a named layer: vgg16.0, vgg16.2, ... vgg16.24")
        p.add_argument("--input", help="input channels x height x width, e.g. 64x224x224")
        p.add_argument("--kernels", help="kernels x height x width, e.g. 64x3x3")
        p.add_argument("--stride", default="1", help="an int or HxW (default 1)")
        p.add_argument("--padding", default="0", help="an int, or top,bottom,left,right (default 0)")
        p.add_argument("--batch", type=positive_int, default=1, help="images per run (default 1)")
        p.add_argument("--dilation", default="1", help="the taps' spacing: an int or HxW (default 1)")
        p.add_argument("--groups", type=positive_int, default=1,
                       help="groups of channels and kernels, each kernel seeing its group's (default 1; "
                            "the channels for a depthwise layer)")
        if db:
            p.add_argument("--db", default="tuning.sqlite", help="the tuning database (default tuning.sqlite)")

    p = add("conv", "run one convolution layer on the device, checked against the reference", cmd_conv)
    layer_options(p, db=False)
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a choice of the automatic route's configuration (repeatable; default: the tuning "
                        "database's best, else the cost model's guess)")
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring")
    p.add_argument("--repeat", type=positive_int, default=5, help="timed runs (the median is reported)")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("-o", "--output", help="directory for the kernels' .cl files and a standalone host script")

    def program_options(p, option: str):
        if option == "file":
            p.add_argument("file", nargs="?", help="a program file to tune through the automatic route (else a "
                                                   "convolution layer, by its options)")
        else:
            p.add_argument("--program", metavar="FILE", help="a program file tuned through the automatic route")
        p.add_argument("--size", action="append", metavar="NAME=VALUE", help="a size of the program (repeatable)")
        p.add_argument("--function", help="the program's function (default: the last one in the file)")
        p.add_argument("--constant", action="append", metavar="INPUT",
                       help="an input that stays fixed across calls, as a layer's weights (repeatable): "
                            "uploaded once, and the kernels that read only such inputs run once")

    p = add("tune", "auto-tune a program or a convolution layer through the automatic route: measured search, "
                    "results in a database", cmd_tune)
    program_options(p, "file")
    layer_options(p)
    p.add_argument("--trials", type=positive_int, default=100,
                   help="configurations to measure in total (resumes); a 3x3 layer of stride 1: as many again for "
                        "Winograd's program")
    p.add_argument("--algorithm", choices=("auto", "direct", "winograd"),
                   help="a layer's program to tune: auto (default) tunes the direct program and, for a 3x3 layer "
                        "of stride 1, Winograd's F(2x2, 3x3), and the layer runs the faster")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring")
    p.add_argument("--repeat", type=positive_int, default=5,
                   help="timing rounds per trial, each of at least 25 ms, taken in turns with the other candidates "
                        "of its batch (the median is kept)")
    p.add_argument("--timeout", type=positive_seconds, default=120.0, help="seconds before a trial counts as hung")
    p.add_argument("--trials-per-batch", type=positive_int, default=8,
                   help="candidates built ahead and measured together, their timing rounds in turns (default 8)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="tune on a Ray cluster (host:port of its head, or auto): one runner per OpenCL device of "
                        "each node, the database here (pip install -e .[ray])")
    p.add_argument("--search", choices=["model", "local", "random"], default="model",
                   help="the search: model (candidates ranked by a cost model, learned from this device's trials "
                        "where LightGBM is installed: pip install -e .[model]; the default), local (random samples, "
                        "then the neighbours of the fastest) or random")

    p = add("report", "the best configurations, failures and Pareto front of a tuning database", cmd_report)
    program_options(p, "program")
    layer_options(p)
    p.add_argument("--network", help="a whole network (vgg16): per layer against the baselines")
    p.add_argument("--device", help="only trials on this device (its name)")
    p.add_argument("-o", "--output", help="directory for the PNG figures (default: beside the database)")

    p = add("export", "write the best program of a tuned program or layer: its .cl files and a standalone host "
                      "script", cmd_export)
    program_options(p, "program")
    layer_options(p)
    p.add_argument("--device", help="only trials on this device (its name)")
    p.add_argument("-o", "--output", default="best", help="directory (default: best)")

    p = add("onnx", "read a network from an ONNX file: describe it, tune its operators, report, export", cmd_onnx)
    p.add_argument("model", help="an .onnx file (pip install -e .[onnx])")
    p.add_argument("--batch", type=positive_int, help="images per call (default: the model's)")
    p.add_argument("--db", default="tuning.sqlite", help="the tuning database (default tuning.sqlite)")
    p.add_argument("--device", help="OpenCL device: P:D index or a name substring")
    p.add_argument("--tune", type=positive_int, metavar="TRIALS", dest="trials",
                   help="tune the network's distinct tasks with this many trials in all (resumes)")
    p.add_argument("--report", action="store_true",
                   help="run it on random inputs (the first call checked step by step) and list each step's "
                        "program, configuration, time and share of the total")
    p.add_argument("--export", metavar="DIR", help="write every kernel and one host script running the network")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--repeat", type=positive_int, default=5,
                   help="timing rounds per trial when tuning; timed calls with --report")
    p.add_argument("--timeout", type=positive_seconds, default=120.0, help="seconds before a trial counts as hung")
    p.add_argument("--trials-per-batch", type=positive_int, default=8,
                   help="candidates built ahead and measured together (default 8)")
    p.add_argument("--ray", metavar="ADDRESS", help="tune on a Ray cluster (see liftpy tune --help)")
    p.add_argument("--search", choices=["model", "local", "random"], default="model",
                   help="the search (see liftpy tune --help)")

    add("devices", "list OpenCL platforms and devices with their limits", cmd_devices)

    from .rewrite.cli import add_commands  # liftpy rewrite, liftpy explore

    add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit status (``--help`` exits 0 from argparse itself)."""
    try:
        args = build_parser().parse_args(argv)  # a mistake here is an InputError too (Parser.error)
        return args.fn(args)
    except LiftError as e:
        print(e.render(), file=sys.stderr)
        return 1
    except InternalError as e:  # liftpy's own bug, its traceback saved where the message says
        print(f"error: {e.message}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
