"""Faults planted in generated kernels, for the tuner's tests: each takes (config, generated program) and
returns the program with its last kernel (the one writing the output) edited as a buggy code generator
might have written it. Only configurations with an even σ are faulty, so that a search meets both kinds.
They expect the ``direct`` pipeline's kernel, and say so if it has changed shape."""

import dataclasses
import re


def _edit_output_kernel(config, generated, edit):
    if config["σ"] % 2:
        return generated
    last = generated.kernels[-1]
    source = edit(last.source)
    assert source != last.source, "the planted fault found nothing to change: the kernel's shape has changed"
    kernels = generated.kernels[:-1] + (dataclasses.replace(last, source=source),)
    return dataclasses.replace(generated, kernels=kernels)


def _body_start(source):
    return source.index("{", source.index("kernel void")) + 1


def leave_first_row_unwritten(config, generated):
    """The work-items of output row 0 return at once: part of the output is never written."""
    def edit(source):
        at = _body_start(source)
        return source[:at] + "\n    if (get_global_id(1) == 0) return;" + source[at:]
    return _edit_output_kernel(config, generated, edit)


def drop_last_window_term(config, generated):
    """The reduction over each window stops one element short: every output misses its last term."""
    def edit(source):
        loops = re.findall(r"for \((?:int|long) (\w+) = 0; \1 < (\d+); \1\+\+\) \{\n", source)
        nest = loops[:3]  # the window's loops: kernel rows, kernel columns, channels (direct's order)
        last = " && ".join(f"{name} == {int(bound) - 1}" for name, bound in nest)
        innermost = re.search(rf"for \((?:int|long) {nest[-1][0]} = 0;[^\n]*\n", source)
        return source[:innermost.end()] + f"        if ({last}) break;\n" + source[innermost.end():]
    return _edit_output_kernel(config, generated, edit)


def write_a_row_twice(config, generated):
    """The work-items of output row 1 compute and write row 0 again: row 0 is written twice, row 1 never."""
    def edit(source):
        return re.sub(r"(int gid1_\w+ = )get_global_id\(1\);", r"\1(get_global_id(1) == 1 ? 0 : get_global_id(1));",
                      source, count=1)
    return _edit_output_kernel(config, generated, edit)


def hang(config, generated):
    """A kernel that never ends (a volatile store keeps the compiler from removing the loop)."""
    def edit(source):
        at = _body_start(source)
        return source[:at] + "\n    volatile global float* spin = output; while (1) spin[0] += 1.0f;" + source[at:]
    return _edit_output_kernel(config, generated, edit)


def first_work_item_returns(config, generated):
    """For the automatic route's trials (a program's configurations): the first work-item of the output
    kernel returns at once, in the configurations with two parallel levels only."""
    if config["parallel"] != 2:
        return generated
    last = generated.kernels[-1]
    at = _body_start(last.source)
    source = last.source[:at] + "\n    if (get_global_id(0) == 0 && get_global_id(1) == 0) return;" + last.source[at:]
    return dataclasses.replace(generated, kernels=generated.kernels[:-1] + (dataclasses.replace(last, source=source),))
