"""Faults planted in generated kernels, for the tuner's tests: each takes (config, generated program) and
returns the program with its last kernel (the one writing the output) edited as a buggy code generator
might have written it. They apply to the automatic route's kernels, and only to the configurations
:func:`faulty` picks (about half of them, by a hash), so that a search meets faulty and sound trials -- but
:func:`winograd_weights_scaled`, to every configuration of one program; each
says so if it found nothing to change."""

import dataclasses
import hashlib
import json
import re


def faulty(config) -> bool:
    """Whether a fault is planted in this configuration's kernels: half of the configurations, whatever their
    choices (a search's starting points share most of theirs)."""
    text = json.dumps({k: int(v) for k, v in sorted(config.items())})
    return hashlib.sha256(text.encode()).digest()[0] % 2 == 0


def _edit_output_kernel(config, generated, edit, every=False):
    if not (every or faulty(config)):
        return generated
    last = generated.kernels[-1]
    source = edit(last.source)
    assert source != last.source, "the planted fault found nothing to change: the kernel's shape has changed"
    kernels = generated.kernels[:-1] + (dataclasses.replace(last, source=source),)
    return dataclasses.replace(generated, kernels=kernels)


def _body_start(source):
    return source.index("{", source.index("kernel void")) + 1


def first_work_item_returns(config, generated):
    """The first work-item returns at once: the outputs it computes are never written."""
    def edit(source):
        at = _body_start(source)
        first = " && ".join(f"get_global_id({d}) == 0" for d in range(3))
        return source[:at] + f"\n    if ({first}) return;" + source[at:]
    return _edit_output_kernel(config, generated, edit)


def drop_last_reduction_step(config, generated):
    """Every sequential reduction loop stops one step short (in each version of the kernel): every output
    misses the terms of its reduction's last step."""
    def edit(source):
        return re.sub(r"(for \(long (\w+) = 0; \2 < )(\d+)(; \2\+\+\) \{\n\s*// reduceSeq over)",
                      lambda m: f"{m.group(1)}{int(m.group(3)) - 1}{m.group(4)}", source)
    return _edit_output_kernel(config, generated, edit)


def _scaled(source):
    source = re.sub(r"(output\[[^\]]+\] = )([^;]+);", r"\1(\2) * 1.001f;", source)
    return re.sub(r"vstore(\d+)\(([^;]+), (\d+), output ", r"vstore\1((\2) * 1.001f, \3, output ", source)


def scale_the_output(config, generated):
    """Every value written to the output is 0.1% too large: an error no NaN or missing term shows, which only
    the tolerance catches."""
    return _edit_output_kernel(config, generated, _scaled)


def hang(config, generated):
    """A kernel that never ends (a volatile store keeps the compiler from removing the loop)."""
    def edit(source):
        at = _body_start(source)
        return source[:at] + "\n    volatile global float* spin = output; while (1) spin[0] += 1.0f;" + source[at:]
    return _edit_output_kernel(config, generated, edit)


def winograd_weights_scaled(config, generated):
    """Every configuration of a program reading Winograd's kernel transform (its stage u) writes its output
    0.1% too large, and no other program's: Winograd's program gets no correct trial, the direct program all."""
    if not any("kernelTransform" in kernel.source for kernel in generated.kernels):
        return generated
    return _edit_output_kernel(config, generated, _scaled, every=True)


def does_not_compile(config, generated):
    """The output kernel does not compile (a statement calls a function that does not exist): a build error,
    which a joint build of several candidates must charge to this one alone."""
    def edit(source):
        at = _body_start(source)
        return source[:at] + "\n    liftpy_no_such_function();" + source[at:]
    return _edit_output_kernel(config, generated, edit)
