"""The automatic route (liftpy.rewrite.route): each example program's space, generated from its loop nests,
and its configurations correct low-level programs (sampled ones by default; with -m slow, a set covering every
pair of choices) -- checked against the numpy references of tests/reference.py, not against liftpy's own
interpreter or naive lowering."""

import dataclasses
import itertools
import math
import time
from pathlib import Path

import numpy as np
import pytest

import liftpy
import liftpy.nn as nn
from liftpy import arith
from liftpy.codegen import kir
from liftpy.codegen.c import CExpr, Guarded, MemRef, VectorOf, VLoad
from liftpy.errors import CodegenError, RewriteError, SizeError
from liftpy.ir import Prim, walk
from liftpy.rewrite.route import RouteSpace

from . import reference
from .test_programs import NAMES, PROGRAMS, _case, _close
from .route_configs import example_config, example_configs


def from_another_side(config) -> bool:
    """Whether a configuration is one of another space's: the joined rows' or a rounded level's."""
    return bool(config["join_rows"] or config["round_up"])


def _space(name):
    inputs, sizes, expected = _case(name)
    return RouteSpace(liftpy.load(PROGRAMS / f"{name}.lift"), sizes), inputs, sizes, expected


def _run(space, config, inputs, sizes):
    return liftpy.compile(space.lower(config), sizes).run(inputs, poison=True).output


@pytest.mark.parametrize("name", NAMES)
def test_sampled_configurations_compute_what_numpy_does(name):
    """The default and eight sampled configurations of each program (every pair of choices: the slow test)."""
    space, inputs, sizes, expected = _space(name)
    configs = [example_config(space)] + space.sample(8, seed=3)
    assert len({tuple(sorted(c.items())) for c in configs[1:]}) == len(configs) - 1  # distinct
    for config in configs:
        _close(_run(space, config, inputs, sizes), expected)


def test_partial_sums_of_a_window_peeled_at_both_edges_build_and_compute():
    """A depthwise window's nine taps in partial sums, read through the padding: the pixel loop is peeled at
    both edges, and each edge's one step declares the sums; inlined into one scope, the two steps declared
    them twice and the kernel did not build (15 of depthwise's 200 trials at 3d390ec)."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((1, 3, 6, 12)).astype(np.float32), rng.standard_normal((3, 3, 3)).astype(np.float32)
    sizes = {"N": 1, "C": 3, "H": 6, "W": 12, "kernelHeight": 3, "kernelWidth": 3, "padSize": (1, 1, 1, 1)}
    space = RouteSpace(liftpy.load(PROGRAMS / "depthwise.lift"), sizes)  # rows of 12: an interior to peel
    config = {"block.window": 1, "chunk": 0, "local_memory": 0, "local_size": 0, "pad_copy": 0, "parallel": 2,
              "partial": 9, "reorder": 1, "sequential_outer": 0, "unroll": 1, "vector": 0, "vector_outer": 0}
    _close(_run(space, config, {"weights": w, "input": x}, sizes), reference.depthwise_nchw(x, w, (1, 1, 1, 1)))


def _pairwise_cover(configs):
    """A few of ``configs`` in which every pair of choices that occurs together in any of them occurs
    together at least once (greedy set cover, as all-pairs testing does): a choice that breaks only beside
    another is run beside it."""
    def pairs(config):
        return set(itertools.combinations(sorted(config.items()), 2))
    candidates = [(config, pairs(config)) for config in configs]
    uncovered = set().union(*(p for _, p in candidates))
    chosen = []
    while uncovered:
        config, covered = max(candidates, key=lambda candidate: len(candidate[1] & uncovered))
        chosen.append(config)
        uncovered -= covered
    return chosen


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_pair_of_choices_computes_what_numpy_does(name):
    """Configurations covering every pair of choices of the whole space (23 to 41 per program, out of 89 to
    3,924): every configuration took CI past its 90 minutes once the space held vectors, relayouts and
    padding copies."""
    space, inputs, sizes, expected = _space(name)
    configs = [c for c in space.sample(100_000) if not from_another_side(c)]  # this side's all
    assert len(configs) == space.count()
    cover = _pairwise_cover(configs)
    assert {(k, v) for c in configs for k, v in c.items()} == {(k, v) for c in cover for k, v in c.items()}
    for config in cover:
        _close(_run(space, config, inputs, sizes), expected)


def test_the_space_is_read_off_the_nests():
    """The levels that can be blocked are the program's spatial maps, by the names they bind: a matrix
    product's rows and columns; a convolution's kernels and windows (its rows hold the windows: not sunk)."""
    space, *_ = _space("matmul")
    assert [level.name for level in space.levels] == ["aRow", "bCol"]
    assert set(space.plain()) == {"parallel", "sequential_outer", "unroll", "local_size", "vector", "vector_outer",
                                  "pad_copy", "partial", "reorder", "local_memory", "chunk", "join_rows", "round_up",
                                  "block.aRow", "block.bCol"}
    assert not space.pads and all(c["pad_copy"] == 0 for c in space.sample(50))
    space, *_ = _space("conv_bias_relu")
    assert [level.name for level in space.levels] == ["kernelWeights", "window"]


def test_a_two_level_block_accumulates_in_registers():
    """matmul blocked 5 x 3 with its loops unrolled: one reduction over k, 15 accumulators, each a scalar
    register (no private array left), and the result still the product."""
    space, inputs, sizes, expected = _space("matmul")
    config = {"parallel": 2, "sequential_outer": 0, "unroll": 1, "local_size": 0, "block.aRow": 5, "block.bCol": 3}
    program = space.lower(config)
    reductions = [n for n in walk(program.function().body) if isinstance(n, Prim) and n.name == "reduceSeq"]
    assert len(reductions) == 1
    executable = liftpy.compile(program, sizes)
    source = executable.generated.kernels[0].source
    assert "float acc[" not in source and source.count("acc_") >= 15
    _close(executable.run(inputs).output, expected)


def test_partial_sums_walk_a_sum_in_independent_registers():
    """matmul unblocked with its sum (k = 8) split into 4 partial sums, unrolled: 4 accumulators, each a scalar
    register, added at the end; in vectors, one float4 accumulator. Partial sums never come with a block (a
    block's accumulators are independent already)."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((8, 6)).astype(np.float32)
    inputs, sizes, expected = {"a": a, "b": b}, {"n": 5, "k": 8, "m": 6}, reference.matmul(a, b)
    space = RouteSpace(liftpy.load(PROGRAMS / "matmul.lift"), sizes)
    base = {**example_config(space), "block.aRow": 1, "block.bCol": 1, "unroll": 1, "vector": 0, "partial": 4}
    for config, accumulators in ((base, "float acc_"), ({**base, "vector": 4}, "float4 acc_")):
        executable = liftpy.compile(space.lower(config), sizes)
        source = executable.generated.kernels[0].source
        assert "acc[" not in source and accumulators in source
        _close(executable.run(inputs, poison=True).output, expected)
    sampled = space.sample(2000)
    assert any(c["partial"] for c in sampled)
    assert all(c["block.aRow"] == c["block.bCol"] == 1 for c in sampled if c["partial"])
    assert not space.valid({**base, "block.bCol": 2})


def test_block_sizes_divide_their_level_and_fit_the_device():
    space, *_ = _space("matmul")  # n = 5, m = 6
    for config in space.sample(1000):
        assert 5 % config["block.aRow"] == 0 and 6 % config["block.bCol"] == 0
    with pytest.raises(RewriteError, match="block_bCol"):
        space.lower({"parallel": 2, "sequential_outer": 0, "unroll": 1, "local_size": 0, "block.aRow": 1, "block.bCol": 4})


def test_a_configuration_with_missing_or_unknown_choices_is_refused():
    space, *_ = _space("matmul")
    with pytest.raises(SizeError, match="block.aRow, block.bCol, chunk, join_rows, local_memory, local_size, pad_copy, "
                                        "parallel, partial, reorder, round_up, sequential_outer, unroll"):
        space.lower({"parallel": 2, "unroll": 1, "block.rows": 2})


@pytest.mark.slow
def test_building_the_space_and_sampling_a_thousand_takes_seconds():
    """The issue's budget is a program's space built and 1,000 configurations sampled in under 10 s, at the
    benchmark's sizes (a 512^3 product; a 64-channel 56 x 56 convolution). It is met on the Zen 4 machine
    (4.2-7.7 s, benchmarks/results/route-space-issue14-955b147.txt) and not on a shared 2-core Zen 3, where
    the convolution's space took 8.6 to 14 s from one run to the next (issue 14's note). So this test guards
    against a regression at twice the budget, the faster of two builds counting (a busy host doubled a
    build's time); benchmarks/route_space.py reports the figure against the budget."""
    sizes = {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1)}
    for name, at in (("matmul", {"n": 512, "k": 512, "m": 512}), ("conv_bias_relu", sizes)):
        seconds = []
        for _ in range(2):  # a fresh space each time: nothing of the first build is reused
            start = time.perf_counter()
            space = RouteSpace(liftpy.load(PROGRAMS / f"{name}.lift"), at)
            configs = space.sample(1000)
            seconds.append(time.perf_counter() - start)
            if seconds[-1] < 10:
                break
        assert min(seconds) < 2 * 10, seconds
        own = [c for c in configs if not from_another_side(c)]
        assert len(own) == min(1000 - (len(configs) - len(own)), space.count()) and len(own) > 100


def test_a_few_samples_make_only_the_structures_they_come_from():
    """sample(n) makes the structures' spaces in its seeded order and stops once n have given one each: a
    small sample of a convolution makes a few sketches, not the 1,824 that took 15 s, and is the start of a
    larger sample with the same seed (asking for more only adds)."""
    inputs, sizes, _ = _case("conv_bias_relu")
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), sizes)
    few = space.sample(5, seed=11)
    assert len({tuple(sorted(c.items())) for c in few}) == 5 and all(space.valid(c) for c in few)
    assert len(space._sketches) < len(space.structures()) // 4  # the sketches made: the cost of a space
    assert space.sample(40, seed=11)[:5] == few
    assert space.sample(0) == []


def test_a_sample_of_a_few_structures_makes_only_their_sketches():
    """sample(n, structures=s): n configurations from s structures' spaces (several from each), s sketches made
    -- a search's prefilter draws many configurations cheaply -- each valid and none twice."""
    inputs, sizes, _ = _case("conv_bias_relu")
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), sizes, join_rows=False, round_up=False)
    drawn = space.sample(24, seed=5, structures=4)
    assert len({tuple(sorted(c.items())) for c in drawn}) == 24 and all(space.valid(c) for c in drawn)
    assert len({space.structure_of(c)[0] for c in drawn}) <= 4
    assert len(space._sketches) <= 4 + 4  # a padding copy's sketch is made from the one it copies for


def test_the_route_targets_a_gpu_profile_offline():
    """On the Mali-G72 profile the space and its kernels are made with no device at hand."""
    inputs, sizes, expected = _case("conv1x1")
    space = RouteSpace(liftpy.load(PROGRAMS / "conv1x1.lift"), sizes, device="mali-g72")
    from liftpy.codegen.program import generate
    from liftpy.params import target_profiles

    for config in space.sample(5, seed=1):
        generated = generate(space.lower(config), sizes, None, target_profiles()["mali-g72"])
        assert generated.kernels and all("kernel void" in k.source for k in generated.kernels)


def test_pretty_printed_best_program_parses_back():
    space, inputs, sizes, expected = _space("conv_bias_relu")
    program = space.lower(example_config(space))
    again = liftpy.parse(liftpy.pretty(program))
    _close(liftpy.compile(again, sizes).run(inputs).output, expected)


def test_neighbours_change_one_choice_and_are_valid():
    """A local search's moves: each neighbour differs in one choice (or in its vectors' width and a block by the
    same factor) and is a configuration of the space."""
    space, *_ = _space("matmul")
    config = example_config(space)
    neighbours = space.neighbours(config)
    assert neighbours and config not in neighbours
    for n in neighbours:
        changed = {k for k in config if n[k] != config[k]}
        assert len(changed) == 1 or (len(changed) == 2 and "vector" in changed), changed
        assert space.valid(n)
        space.lower(n)  # the route makes it
    assert {k for n in neighbours for k in n if n[k] != config[k]} >= {"parallel", "block.aRow", "vector"}
    assert not space.valid({**config, "vector": 3}) and not space.valid({**config, "parallel": 4})


def test_a_move_widens_the_vectors_and_their_block_together():
    """From 4 kernels in one vector of 4 by 13 windows (13 is prime: no block of windows but 13), one move reaches 8
    kernels in one vector of 8 -- as many accumulators, twice the lanes -- and back; that block then computes
    what numpy does."""
    space = nn.conv_space(input=(8, 13, 13), kernels=(16, 1, 1))
    narrow = {**example_config(space), "block.kernelWeights": 4, "block.window": 13, "vector": 4, "vector_outer": 2,
              "unroll": 1}
    wide = {**narrow, "block.kernelWeights": 8, "vector": 8}
    assert space.valid(narrow) and space.valid(wide)
    assert wide in space.neighbours(narrow) and narrow in space.neighbours(wide)
    x = np.random.default_rng(5).standard_normal((1, 8, 13, 13)).astype(np.float32)
    w = np.random.default_rng(6).standard_normal((16, 8, 1, 1)).astype(np.float32)
    _close(nn.conv2d(x, w, config=wide), reference.conv2d_nchw(x, w, np.zeros(16, np.float32), (1, 1), (0, 0, 0, 0)))


def test_the_default_keeps_the_inner_block_in_vectors():
    """matmul at 5 x 7 x 6: rows (5, prime) are not blocked by the default, columns by 6, in vectors of 2."""
    space, *_ = _space("matmul")
    config = example_config(space)
    assert (config["block.aRow"], config["block.bCol"], config["vector"], config["unroll"]) == (1, 6, 2, 1)


def test_vectors_along_the_kernels_read_weights_relaid_once():
    """A convolution's 2D block (kernels x windows) with the kernels' accumulators in vectors: the weights of
    v kernels are one vector load from a copy of the weights with the kernels innermost (``relayout``), a
    kernel that reads only the weights, so it runs once when they are prepared as a constant; every call
    still computes numpy's answer. The copy is tiled by the block of kernels: a block's weights sit together."""
    space, inputs, sizes, expected = _space("conv_bias_relu")
    kernels = next(level for level in space.levels if level.name == "kernelWeights").extent
    config = {**example_config(space), "block.kernelWeights": kernels, "vector": kernels, "vector_outer": 2,
              "unroll": 1, "pad_copy": 0}
    assert space.valid(config), config
    executable = liftpy.compile(space.lower(config), sizes)
    copy, main = executable.generated.kernels
    assert "weightsT" in copy.source and "input" not in copy.source
    assert f"vload{kernels}(0, weightsT" in main.source
    prepared = executable.prepare({"weights": inputs["weights"]})
    assert len(prepared.hoisted) == 1
    per_call = {k: v for k, v in inputs.items() if k != "weights"}
    for _ in range(2):
        _close(prepared.run(per_call, poison=True).output, expected)
    gathered = liftpy.compile(space.lower({**config, "vector_outer": 1}), sizes)
    assert len(gathered.generated.kernels) == 1
    _close(gathered.run(inputs, poison=True).output, expected)
    # a block of half the kernels: the copy tiled by the block, [K/b][window][b], each block's weights one run
    half = {**config, "block.kernelWeights": kernels // 2, "vector": kernels // 2}
    assert space.valid(half), half
    tiled = liftpy.compile(space.lower(half), sizes)
    copy, main = tiled.generated.kernels
    window = inputs["weights"][0].size
    assert copy.launch.global_size == (kernels // 2, window, 2)
    assert f"vload{kernels // 2}(0, weightsT" in main.source
    _close(tiled.run(inputs, poison=True).output, expected)


CHANNELS_LAST = """
def conv2dNHWC(input: [[[[float]_C]_W]_H]_N, weights: [[[[float]_kernelWidth]_kernelHeight]_C]_K, biases: [float]_K,
               padSize: (int, int, int, int)) =
  map(image -> map(row -> map(window -> map((kernelWeights, bias) ->
      reduce(bias, (acc, (x, w)) -> acc + x * w, zip(join(join(window)), join(join(channelsLast(kernelWeights))))),
    zip(weights, biases)), row), slide2D((kernelHeight, kernelWidth), (1, 1), pad2D(padSize, value = 0, image))),
  input)
"""


def test_vectors_along_an_inner_level_read_the_inputs_it_walks_relaid():
    """A convolution written channels-last (the kernels' map innermost: a block's inner level) with the kernels'
    accumulators in vectors: vector_outer 3 reads v kernels' weights as one vector load from a copy with the
    kernels innermost, as vector_outer 2 does for an outer level -- without it, v scalar loads 576 apart in a
    network's layer. The padding read branch-free: no copy of the input. numpy's answer either way."""
    from liftpy.rewrite.route.choices import RELAID_INNER

    sizes = dict(N=2, C=4, H=5, W=6, K=8, kernelHeight=3, kernelWidth=3, padSize=(1, 1, 1, 1))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    expected = reference.conv2d_nchw(x.transpose(0, 3, 1, 2), w, b, padding=(1, 1, 1, 1)).transpose(0, 2, 3, 1)
    expected = expected[..., None]  # each sum a reduce's array of one
    space = RouteSpace(liftpy.parse(CHANNELS_LAST), sizes)
    assert any(s.vector_outer == RELAID_INNER for s in space.structures())
    config = {**space.plain(), "block.kernelWeights": 8, "block.window": 3, "vector": 4, "vector_outer": RELAID_INNER,
              "unroll": 1, "pad_copy": 3, "parallel": 2}
    assert space.valid(config), config
    executable = liftpy.compile(space.lower(config), sizes)
    copy, main = executable.generated.kernels
    assert "weightsT" in copy.source and "input" not in copy.source
    assert "vload4(0, weightsT" in main.source and "padded" not in main.source
    inputs = {"input": x, "weights": w, "biases": b}
    _close(executable.run(inputs, poison=True).output, expected)
    gathered = liftpy.compile(space.lower({**config, "vector_outer": 0}), sizes)
    assert len(gathered.generated.kernels) == 1 and "weightsT" not in gathered.generated.kernels[0].source
    _close(gathered.run(inputs, poison=True).output, expected)


def test_a_poolings_windows_in_vectors_read_each_step_as_one_load_of_their_span():
    """Max pooling's windows in a vectorised block (``vectorizeBlockOf``: a step reads one array): the lanes of a
    step sit a stride apart, read as one load of the elements they span and its components -- the load starting
    at the first lane, or ending at the last where a load from the first would pass the input's end -- and the
    kernel computes numpy's pooling."""
    program = liftpy.load(PROGRAMS / "maxpool.lift")
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 18)).astype(np.float32)
    sizes = {"N": 2, "C": 3, "H": 7, "W": 18, "poolSize": 3, "poolStride": 2}
    space = RouteSpace(program, sizes)
    for vector in (8, 4):
        config = {**space.plain(), "block.window": 8, "vector": vector, "unroll": 1, "parallel": 2}
        assert space.valid(config), config
        executable = liftpy.compile(space.lower(config), sizes)
        source = executable.generated.kernels[0].source
        picks = ".s02468ace" if vector == 8 else ".s0246"
        assert picks in source and f"vload{2 * vector}(0, input" in source
        _close(executable.run({"input": x}, poison=True).output, reference.max_pool_nchw(x, 3, 2))


def test_lanes_a_stride_apart_are_one_load_only_where_it_stays_inside_the_memory():
    """A load of the lanes' span reads elements beside them: it starts at the first lane or ends at the last,
    whichever the memory holds, and where it holds neither (or the memory is private) the lanes stay apart."""
    from liftpy.codegen.c import Memory, MemRef, VectorOf, VLoad, vector_of
    from liftpy.types import FLOAT

    def lanes(mem, first):
        return tuple(CExpr(MemRef(mem, first + 2 * k)) for k in range(8))

    def part(expr):
        return expr.parts[0]

    fits = part(vector_of("float8", lanes(Memory("x", "global", FLOAT, 16), 0)))
    assert isinstance(fits, VLoad) and (fits.width, fits.pick) == (16, tuple(range(0, 16, 2)))
    assert fits.render() == "vload16(0, x + 0).s02468ace"
    ends = part(vector_of("float8", lanes(Memory("x", "global", FLOAT, 16), 1)))  # from 1 the load would pass 16
    assert isinstance(ends, VLoad) and int(ends.offset.as_int()) == 0 and ends.pick == tuple(range(1, 16, 2))
    neither = part(vector_of("float8", lanes(Memory("x", "global", FLOAT, 15), 0)))
    assert isinstance(neither, VectorOf)
    private = part(vector_of("float8", lanes(Memory("x", "private", FLOAT, 16), 0)))
    assert isinstance(private, VectorOf)


def test_joined_rows_let_a_block_of_windows_span_rows():
    """``join_rows``: conv2d.lift's map over the rows of windows and each row's windows, joined into one map over
    the image's windows (``joinRows``), so that a block may span rows -- 4 windows of a 6-wide output, whose rows
    allow blocks of 2, 3 and 6. Offered where the joined level allows a block of up to 16 that the rows do not (not
    on a 16-wide output: 256 windows add only blocks of 32 and more). Its configurations compute what numpy does;
    samples hold only joined ones whose blocks the rows do not allow; a configuration's neighbours include its twin
    with the rows joined or not."""
    program = liftpy.load(Path(liftpy.__file__).parent / "nn" / "conv2d.lift")
    sizes = {"N": 1, "C": 8, "H": 6, "W": 6, "K": 16, "groups": 1, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1)}
    space = RouteSpace(program, sizes, function="conv2d")
    assert space.joined is not None
    assert {level.name: level.extent for level in space.levels}["window"] == 6
    assert {level.name: level.extent for level in space.joined.levels}["window"] == 36
    config = {**example_config(space), "block.window": 3}
    joined = {**config, "block.window": 4, "join_rows": 1}
    assert space.valid(config) and space.valid(joined) and not space.valid({**config, "block.window": 4})
    assert {**config, "join_rows": 1} in space.neighbours(config)
    assert config in space.neighbours({**config, "join_rows": 1})
    rng = np.random.default_rng(10)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    expected = reference.conv2d_groups_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    for c in (joined, {**joined, "parallel": 1}, {**joined, "pad_copy": 0}):
        assert space.valid(c)
        output = liftpy.compile(space.lower(c), sizes, function="conv2d").run(
            {"input": x, "weights": w, "biases": b}, poison=True).output
        _close(output.reshape(expected.shape), expected)
    drawn = space.sample(200, seed=4)  # an eighth from the other sides: only blocks the rows do not allow
    sides = [c for c in drawn if from_another_side(c)]
    assert 0 < len(sides) <= 25 and len(drawn) == len({tuple(sorted(c.items())) for c in drawn})
    assert all(space.valid(c) and (space.needs_joining(c) if c["join_rows"] else space.needs_rounding(c))
               for c in sides)
    wide = RouteSpace(program, {**sizes, "H": 16, "W": 16}, function="conv2d")
    assert wide.joined is None and not wide.valid({**example_config(wide), "join_rows": 1})
    with pytest.raises(SizeError, match="join_rows"):
        wide.lower({**example_config(wide), "join_rows": 1})


@pytest.mark.slow
def test_a_rounded_level_takes_blocks_that_do_not_divide_it():
    """``round_up``: the innermost level (a row's windows, 63 of them) rounded up to a multiple of a block that
    does not divide it (``roundUp``: the last window repeated, its extra results cropped), so that 63 windows
    take blocks of 4 and 8 (64 computed). Offered for blocks up to 16 where the elements added are at most a
    quarter of the level (every block but 63's divisors here; for a 7-wide row, blocks of 2 and 4). Its
    configurations compute what numpy does, every window written once and none past the output (the extra
    results' stores guarded); a block one larger or smaller is a neighbour, rounded or not as it needs; on AVX2
    the starting points hold 2 vectors of kernels x 6 windows (12 accumulators: the register target) of a
    64-wide row rounded up to 66; samples draw a few, each a block this row's length does not allow."""
    from liftpy.params import target_profiles

    avx2 = dataclasses.replace(target_profiles()["pocl-cpu"], preferred_vector_width_float=8)
    program = liftpy.load(Path(liftpy.__file__).parent / "nn" / "conv2d.lift")
    sizes = {"N": 1, "C": 8, "H": 3, "W": 63, "K": 16, "groups": 1, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1)}
    space = RouteSpace(program, sizes, avx2, function="conv2d")
    assert space.levels[-1].name == "window" and space.levels[-1].extent == 63
    assert space.rounded_blocks == {2: 1, 4: 1, 8: 1, 16: 1, 5: 2, 13: 2, 6: 3, 11: 3, 10: 7, 14: 7, 12: 9,
                                    15: 12}  # 63 = 7 x 9: its divisors 3, 7, 9 need none
    assert space.rounded(1).levels[-1].extent == 64 and space.rounded(2).levels[-1].extent == 65
    assert space.rounded(4) is None  # no block up to 16 is rounded by 4
    config = {**example_config(space), "block.window": 3}
    rounded = {**config, "block.window": 4, "round_up": 1}
    assert space.valid(config) and space.valid(rounded) and not space.valid({**config, "block.window": 4})
    assert space.valid({**config, "block.window": 5, "round_up": 2})
    assert not space.valid({**config, "block.window": 5, "round_up": 1})  # 64 windows: not blocks of 5
    narrow = RouteSpace(program, {**sizes, "W": 7}, avx2, function="conv2d")
    assert narrow.rounded_blocks == {2: 1, 4: 1}  # 3 would add 2 of 7: more than a quarter
    assert rounded in space.neighbours(config) and config in space.neighbours(rounded)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 8, 3, 63)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    expected = reference.conv2d_groups_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    for c in (rounded, {**rounded, "block.window": 8}, {**rounded, "pad_copy": 0}, {**rounded, "parallel": 3}):
        assert space.valid(c)
        exe = liftpy.compile(space.lower(c), sizes, function="conv2d")
        assert "if (" in exe.sources["conv2d_output"]
        output = exe.run({"input": x, "weights": w, "biases": b}, poison=True).output
        _close(output.reshape(expected.shape), expected)
    drawn = [c for c in space.sample(200, seed=5) if c["round_up"]]
    assert 0 < len(drawn) <= 25 and all(space.valid(c) and space.needs_rounding(c) for c in drawn)
    with pytest.raises(SizeError, match="round_up"):
        space.lower({**config, "round_up": 4})


def test_another_tasks_configuration_adapted_to_a_space_keeps_its_choices_where_they_fit():
    """``adapted``: what won on a 64-wide row (8 windows x 4 kernels, vectors along the windows) made a
    configuration of other sizes: on 63 windows the same blocks with the row rounded up; on 7 windows (no
    multiple of 8 or 4 divides it, rounding allows 2 or 4) 4 windows in vectors of 4, rounded up; with 8 kernels
    itself. Each computes numpy's convolution. Another program's levels (a matrix product's) are not adapted."""
    from liftpy.params import target_profiles

    avx2 = dataclasses.replace(target_profiles()["pocl-cpu"], preferred_vector_width_float=8)
    program = liftpy.load(Path(liftpy.__file__).parent / "nn" / "conv2d.lift")
    sizes = {"N": 1, "C": 8, "H": 3, "W": 64, "K": 16, "groups": 1, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1)}
    wide = RouteSpace(program, sizes, avx2, function="conv2d")
    won = next(c for c in example_configs(wide)
               if (c["block.window"], c["vector"], c["vector_outer"], c["round_up"], c["join_rows"]) == (8, 8, 0, 0, 0))
    rng = np.random.default_rng(4)
    for at, changed in (({"W": 63}, {"round_up": 1}), ({"W": 7}, {"block.window": 4, "vector": 4, "round_up": 1}),
                        ({"K": 8}, {})):
        space = RouteSpace(program, {**sizes, **at}, avx2, function="conv2d")
        config = space.adapted(won)
        assert config == {**won, **changed} and space.valid(config), (at, config)
        here = {**sizes, **at}
        x = rng.standard_normal((1, 8, 3, here["W"])).astype(np.float32)
        w = rng.standard_normal((here["K"], 8, 3, 3)).astype(np.float32)
        b = rng.standard_normal(here["K"]).astype(np.float32)
        expected = reference.conv2d_groups_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
        exe = liftpy.compile(space.lower(config), here, function="conv2d")
        output = exe.run({"input": x, "weights": w, "biases": b}, poison=True).output
        _close(output.reshape(expected.shape), expected)
    matmul = RouteSpace(liftpy.load(PROGRAMS / "matmul.lift"), {"m": 16, "n": 16, "k": 16}, avx2)
    assert matmul.adapted(won) is None


def test_a_map_over_a_blocks_results_takes_no_parallel_level():
    """A ReLU over a block's results (the kernels' accumulators of conv+bias+ReLU) is not a level: with three
    parallel levels asked for below the sequential kernel blocks, the rows and the windows run in parallel and
    nothing else (the ReLU over the block of 4 kernels took the third dimension: each work-item computed the
    whole block for one of its kernels, and in vectors the lane became a run-time choice the code generator
    refused, 2 of 67 trials of a tuning)."""
    rng = np.random.default_rng(8)
    x, w, b = rng.standard_normal((1, 3, 7, 6), dtype=np.float32), rng.standard_normal((8, 3, 3, 3), dtype=np.float32), \
        rng.standard_normal(8, dtype=np.float32)
    sizes = {"N": 1, "C": 3, "H": 7, "W": 6, "K": 8, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 0, 2, 1), "stride": (2, 1)}
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), sizes)
    expected = np.maximum(reference.conv2d_nchw(x, w, b, (2, 1), (1, 0, 2, 1)), 0)
    for vector in (0, 4):
        config = {**example_config(space), "block.kernelWeights": 4, "block.window": 1, "parallel": 3,
                  "sequential_outer": 1, "unroll": 1, "vector": vector, "vector_outer": 0, "pad_copy": 1,
                  "local_size": 0}
        assert space.valid(config), config
        executable = liftpy.compile(space.lower(config), sizes)
        *_, main = executable.generated.kernels
        assert sorted(d for d in main.launch.global_size if d > 1) == [3, 7]  # output rows, windows of a row
        _close(executable.run({"input": x, "weights": w, "biases": b}, poison=True).output, expected)


@pytest.mark.parametrize("name", ["conv_bias_relu", "grouped_conv", "depthwise", "dilated_conv"])
def test_the_padding_copied_by_a_kernel_of_its_own(name):
    """``pad_copy``: the padded input is copied by a kernel that reads only the input (a convolution's image,
    a grouped convolution's groups of channels, a depthwise convolution's channels: the copy walks the maps
    above the padding), and the computation reads the copy. The copy runs at every call, not once: a call on
    a mirrored input, then one on the first input again, buffers poisoned first, give another answer and then
    numpy's again."""
    space, inputs, sizes, expected = _space(name)
    assert space.pads
    config = {**example_config(space), "pad_copy": 1}
    assert space.valid(config) and {**config, "pad_copy": 0} in space.neighbours(config)
    executable = liftpy.compile(space.lower(config), sizes)
    (copy,) = [kernel for kernel in executable.generated.kernels if kernel.produces == "padded"]
    assert set(copy.args) == {"input", "padded"}
    assert all("input" not in kernel.args for kernel in executable.generated.kernels if kernel is not copy)
    constants = {k: v for k, v in inputs.items() if k in ("weights", "biases")}
    prepared = executable.prepare(constants)
    assert copy.name not in prepared.hoisted and copy.name in {plan.name for plan, _ in prepared.kernels}
    _close(prepared.run({"input": inputs["input"]}, poison=True).output, expected)
    other = prepared.run({"input": inputs["input"][:, :, ::-1].copy()}, poison=True).output
    assert not np.allclose(other, expected, atol=1e-3)
    _close(prepared.run({"input": inputs["input"]}, poison=True).output, expected)


def _unconditional_loads(fragment):
    """The loads a value makes whatever its padding conditions say: a padded read printed branch-free loads its
    safe element; one printed with a branch loads its element only where the condition holds."""
    if isinstance(fragment, Guarded):
        yield from _unconditional_loads(fragment.border)
        if fragment.safe is not None:  # printed branch-free
            yield from _unconditional_loads(fragment.safe)
    elif isinstance(fragment, CExpr):
        for part in fragment.parts:
            yield from _unconditional_loads(part)
    elif isinstance(fragment, VectorOf):
        for lane in fragment.lanes:
            yield from _unconditional_loads(lane)
    elif isinstance(fragment, (MemRef, VLoad)):
        yield fragment


def test_reads_through_padding_are_versioned_per_tap():
    """A dilated convolution reading its input through the padding view, its taps walked outside its channels:
    the loops of the window (a nest split from one reduction) get an interior version per step, so that only
    the taps reaching the padding test it, and the sums are numpy's."""
    space, inputs, sizes, expected = _space("dilated_conv")
    config = {**example_config(space), "pad_copy": 0, "reorder": 0}
    assert space.valid(config)
    executable = liftpy.compile(space.lower(config), sizes)
    (conv,) = [kernel for kernel in executable.generated.kernels if kernel.produces == "output"]
    assert "// interior: no padding condition depends on j" in conv.source  # a tap of the split window
    assert "? input[" in conv.source  # the border's taps still test, with a branch
    _close(executable.run(inputs, poison=True).output, expected)


@pytest.mark.parametrize("name", ["conv_bias_relu", "grouped_conv", "depthwise", "dilated_conv"])
def test_the_padding_read_branch_free(name):
    """``pad_copy`` 3: the padding view's reads are selects (``padSelect``) of an element that exists -- every
    load made whatever the condition lies within its buffer, by the bounds of its index -- and no read
    branches; the sums are numpy's. It shares the view's parameter space and neighbours it."""
    space, inputs, sizes, expected = _space(name)
    config = {**example_config(space), "pad_copy": 3}
    assert space.valid(config) and {**config, "pad_copy": 0} in space.neighbours(config)
    assert space.space(space.structure_of(config)[0]) is space.space(space.structure_of({**config, "pad_copy": 0})[0])
    executable = liftpy.compile(space.lower(config), sizes)
    (kernel,) = [kernel for kernel in executable.generated.kernels if "input" in kernel.args]
    assert "select(" in kernel.source and "?" not in kernel.source
    loads = [load for s in kir.walk(kernel.ir.body) for value in kir.values(s) for load in _unconditional_loads(value)]
    assert loads
    for load in loads:
        lo, hi = (bound.as_int() for bound in arith.bounds(load.offset))
        width = load.width if isinstance(load, VLoad) else 1
        assert 0 <= lo and hi + width <= load.mem.size, (load, lo, hi, load.mem.size)
    _close(executable.run(inputs, poison=True).output, expected)


@pytest.mark.slow
def test_the_loop_order_walks_a_window_by_channels():
    """``reorder``: a convolution's window and weights walked channel first (``reorderSum``), with the
    parameter space of the order as written. Its sketch is made only when a configuration is lowered, on the
    prediction that it exists where the reordered program blocks and vectorises as the structure says and the
    structure as written lowers: every reordered structure of the space is made here to hold it to that, and
    a few run against numpy."""
    space, inputs, sizes, expected = _space("conv_bias_relu")
    reordered = [structure for structure, _ in space.sketches() if structure.reorder]
    assert reordered and all(space.space(s) is space.space(dataclasses.replace(s, reorder=0)) for s in reordered)
    assert all(space.sketch(s).program is not None for s in reordered)
    config = {**example_config(space), "reorder": 1}
    assert space.valid(config) and config in space.neighbours(example_config(space))
    def transposes(program):
        return sum(isinstance(n, Prim) and n.name == "transpose" for n in walk(program.function().body))

    assert transposes(space.lower(config)) == transposes(space.lower(example_config(space))) + 2  # window, weights
    _close(_run(space, config, inputs, sizes), expected)
    for config in [c for c in space.sample(60, seed=9) if c["reorder"]][:4]:
        _close(_run(space, config, inputs, sizes), expected)
    matmul, *_ = _space("matmul")  # a dot product of two rows: no order to change
    assert all(c["reorder"] == 0 for c in matmul.sample(100))


@pytest.mark.slow
def test_a_work_group_stages_what_its_work_items_share_in_local_memory():
    """``local_memory``: a matrix product's row of a (read by each column of the group), a convolution's
    weights (read by each pixel of the group) copied to local memory once per group, then read there. The
    space is a GPU's (a CPU's local memory is ordinary memory: its space has no staging); the kernels of four
    programs run here, on PoCL. The group keeps the size tuned (the copy is walked in strides, not one work-item per
    element), and the answer is numpy's. A staged sketch is made only when lowered, on the prediction that a
    group reads an array it does not bind: every staged structure of two spaces is made here to hold it to that."""
    inputs, sizes, _ = _case("matmul")
    cpu = RouteSpace(liftpy.load(PROGRAMS / "matmul.lift"), sizes, device="pocl-cpu")
    assert cpu.device.is_cpu and not any(structure.local_memory for structure in cpu.structures())
    for name in ("matmul", "conv_bias_relu", "depthwise", "grouped_conv"):
        inputs, sizes, expected = _case(name)
        space = RouteSpace(liftpy.load(PROGRAMS / f"{name}.lift"), sizes, device="nvidia-gtx1080")
        if name in ("matmul", "conv_bias_relu"):
            staged = [structure for structure, _ in space.sketches() if structure.local_memory]
            assert staged and all(space.sketch(s).program is not None for s in staged)
        configs = [c for c in space.sample(600, seed=5) if c["local_memory"]][:3]
        assert configs and all(space.valid({**c, "local_memory": 0}) for c in configs)
        for config in configs:
            executable = liftpy.compile(space.lower(config), sizes)
            (kernel,) = [k for k in executable.generated.kernels if "local " in k.source]
            # the innermost parallel level is split into groups: dimension 0, or 1 under a sequential level
            assert math.prod(kernel.launch.local_size) == config["local_size"]
            _close(executable.run(inputs, poison=True).output, expected)
    # a work-item reads only its own element: nothing to stage
    maxpool = RouteSpace(liftpy.load(PROGRAMS / "maxpool.lift"), _case("maxpool")[1], device="nvidia-gtx1080")
    assert all(c["local_memory"] == 0 for c in maxpool.sample(200))


@pytest.mark.parametrize("name, config", [
    ("matmul", {"parallel": 2, "sequential_outer": 1, "local_size": 2, "local_memory": 1, "block.aRow": 1,
                "block.bCol": 3}),
    ("depthwise", {"parallel": 3, "sequential_outer": 1, "local_size": 5, "local_memory": 1, "block.window": 1})])
def test_a_loop_above_the_groups_waits_before_restaging(name, config):
    """A sequential loop above the work-groups (the batch, a matrix's rows) whose step stages an array in local
    memory ends each step with a barrier: the next step overwrites the staged copy while slower work-items
    could still read it. Without it the matrix product's kernel has that race (harmless only where a group's
    work-items run in step, as on PoCL), and PoCL never finished the depthwise kernel."""
    inputs, sizes, expected = _case(name)
    space = RouteSpace(liftpy.load(PROGRAMS / f"{name}.lift"), sizes, device="nvidia-gtx1080")
    config = {**space.ABSENT, "unroll": 0, **config}
    executable = liftpy.compile(space.lower(config), sizes)
    (kernel,) = [k for k in executable.generated.kernels if "local " in k.source]
    (outer,) = [s for s in kernel.ir.body if isinstance(s, kir.SeqFor)]
    assert any(isinstance(s, kir.Barrier) for s in kir.walk(outer.body[:-1]))
    assert isinstance(outer.body[-1], kir.Barrier)
    _close(executable.run(inputs, poison=True).output, expected)


@pytest.mark.slow
def test_what_a_group_stages_fits_the_devices_local_memory():
    """On the Mali-G72 profile (32 KiB: 8,192 floats of local memory), a 512-channel layer: the staged
    configurations' kernels, generated offline, declare at most that much local memory (read off their OpenCL);
    the code generator refuses those the constraint leaves out, counting its own allocations."""
    import re

    from liftpy.codegen.program import generate
    from liftpy.params import target_profiles

    sizes = {"N": 1, "C": 512, "H": 14, "W": 14, "K": 512, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1)}
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), sizes, device="mali-g72")
    mali = target_profiles()["mali-g72"]

    def local_floats(program):
        sources = [k.source for k in generate(program, sizes, None, mali).kernels]
        return max(sum(int(n) for n in re.findall(r"local float \w+\[(\d+)\]", source)) for source in sources)

    configs = space.sample(3000, seed=2)
    staged = [c for c in configs if c["local_memory"]][:6]
    assert staged and all(0 < local_floats(space.lower(c)) <= 8192 for c in staged)
    refused = [c for c in configs if not c["local_memory"] and c["local_size"] and c["pad_copy"] == 0
               and c["reorder"] == 0 and not from_another_side(c)
               and not space.valid({**c, "local_memory": 1})]
    made = [(structure, values) for structure, values in (space.structure_of({**c, "local_memory": 1}) for c in refused)
            if space.sketch(structure).program is not None][:3]  # those where the group reads a shared array
    assert made
    for structure, values in made:  # the code generator's own count refuses them too
        with pytest.raises(CodegenError, match="bytes of local memory; the device has 32768"):
            local_floats(space.space(structure.shared).specialize(values, space.sketch(structure).program))


def test_a_level_of_one_element_takes_no_parallel_dimension():
    """conv2d.lift for one image and one group: the maps over the images and the groups run once, as
    sequential loops of one step, and the two parallel levels of the default are the kernels and the rows
    (a dimension given to the image ran the whole layer in one work-item, on one core). 48 kernels: the
    default's block leaves them more than one block on every device (on AVX2, 24 kernels were one block of 3
    vectors x 2 pixels)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 7, 6)).astype(np.float32)
    w = rng.standard_normal((48, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    sizes = {"N": 1, "C": 3, "H": 7, "W": 6, "K": 48, "groups": 1, "kernelHeight": 3, "kernelWidth": 3,
             "padSize": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1)}
    space = RouteSpace(liftpy.load(Path(liftpy.__file__).parent / "nn" / "conv2d.lift"), sizes, function="conv2d")
    assert {"image", "groupInput"} <= space.unit_levels
    for config in [example_config(space), {**example_config(space), "sequential_outer": 1, "parallel": 1}]:
        executable = liftpy.compile(space.lower(config), sizes, function="conv2d")
        launch = executable.generated.kernels[-1].launch.global_size
        assert sum(1 for extent in launch if extent > 1) == config["parallel"]
        expected = reference.conv2d_groups_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
        output = executable.run({"input": x, "weights": w, "biases": b}, poison=True).output
        _close(output.reshape(expected.shape), expected)


@pytest.mark.parametrize("name", ["matmul", *(pytest.param(n, marks=pytest.mark.slow)
                                              for n in ("conv_bias_relu", "grouped_conv", "dilated_conv"))])
def test_a_sums_chunks_summed_by_a_stage_of_their_own(name):
    """``chunk``: the sum split into chunks of ω elements whose sums a first kernel writes to memory, one per
    chunk of every output element, and a second kernel adds (with what followed the sum: a bias, a ReLU) --
    the paper's two-kernel shape, for any program. The chunks are a level of the first stage, parallel where
    the parallel levels reach it; the chunks' sums cost n/ω times the output's memory."""
    space, inputs, sizes, expected = _space(name)
    assert space.sum_length
    split = [c for c in space.sample(600, seed=2) if c["chunk"]]
    assert split and all(space.sum_length % c["chunk"] == 0 for c in split)
    assert all(c[level.key] == 1 for c in split for level in space.levels)  # never with a block
    deepest = max(split, key=lambda c: (c["parallel"] + c["sequential_outer"], c["chunk"] < space.sum_length))
    for config in {json_key(c): c for c in [deepest, *split[:3]]}.values():
        executable = liftpy.compile(space.lower(config), sizes)
        *_, partials, last = executable.generated.kernels
        assert partials.produces == "partials" and last.produces == "output"
        chunks = space.sum_length // config["chunk"]
        output = int(np.prod(expected.shape))
        assert executable.generated.buffer("partials").bytes == 4 * output * chunks
        assert "partials" in last.args and not {"input", "a", "b"} & set(last.args)  # the second stage reads sums
        _close(executable.run(inputs, poison=True).output, expected)
    if name == "matmul":  # three levels (rows, columns, chunks): all three parallel
        executable = liftpy.compile(space.lower({**deepest, "parallel": 3, "sequential_outer": 0}), sizes)
        partials = executable.generated.kernels[0]
        assert space.sum_length // deepest["chunk"] in partials.launch.global_size


@pytest.mark.slow
def test_chunks_sums_that_no_buffer_could_hold_are_not_in_the_space():
    """Each stage's result is one buffer, so the device's largest allocation bounds the chunks' sums as it
    bounds the output: on VGG-16's layer 19 (a sum of 4,608 products) chunks of 3 elements would need 2.3 GiB
    of sums, and PoCL refused the buffer (INVALID_BUFFER_SIZE) in a tuning. On a device that allocates less
    than a grouped convolution's chunks' sums of 2 elements (a sum of 18), those chunks are out of the space;
    chunks of 6, a third of the sums, are in."""
    from liftpy.params import target_profiles

    wide, _, sizes, _ = _space("grouped_conv")
    config = next(c for c in wide.sample(600, seed=2) if c["chunk"] == 2)
    sums_bytes = liftpy.compile(wide.lower(config), sizes).generated.buffer("partials").bytes
    small = dataclasses.replace(target_profiles()["pocl-cpu"], max_mem_alloc_size=sums_bytes // 2)
    narrow = RouteSpace(liftpy.load(PROGRAMS / "grouped_conv.lift"), sizes, small)
    assert not narrow.valid(config) and wide.valid(config)
    assert narrow.valid({**config, "chunk": 6})


def json_key(config):
    return tuple(sorted(config.items()))


def test_a_stage_is_made_only_where_fission_computes_nothing_twice():
    """``hoist_stage`` refuses to take a computation out of a map that walks a computed array (fission would
    compute it twice); where the array is an earlier stage's, the new stage follows it. ``split_sum`` leaves a
    sum that is not an addition alone."""
    from liftpy.catalogue.reduction import split_sum

    computed = liftpy.parse("""def p(xs: [[float]_8]_4) =
        map(row -> reduce(0.0f, (acc, x) -> acc + x, row), map(r -> map(x -> x * 2.0f, r), xs))""")
    refused = split_sum(4)(computed)
    assert not refused and "walks a computed array" in refused.reason
    staged = liftpy.parse("""def p(xs: [[float]_8]_4) = {
        val ys = map(r -> map(x -> x * 2.0f, r), xs);
        map(row -> reduce(0.0f, (acc, x) -> acc + x, row), ys) }""")
    result = split_sum(4)(staged)
    assert result
    text = liftpy.pretty(result.program)
    assert text.index("val ys") < text.index("val partials")
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    executable = liftpy.compile(liftpy.rewrite.lower_to_opencl(result.program).program, {})
    assert [k.produces for k in executable.generated.kernels] == ["ys", "partials", "output"]
    np.testing.assert_allclose(executable.run({"xs": x}, poison=True).output.ravel(), 2 * x.sum(axis=1))
    maximum = liftpy.parse("def p(xs: [[float]_8]_4) = map(row -> reduce(0.0f, (acc, x) -> max(acc, x), row), xs)")
    assert not split_sum(4)(maximum)


def test_each_stage_of_a_program_gets_its_own_parallel_levels():
    """The default lowering parallelises every stage of a function's body -- each val that computes, then the
    result -- not the first one alone (the second stage ran on one work-item)."""
    program = liftpy.parse("""def p(xs: [[float]_6]_5) = {
        val doubled = map(r -> map(x -> x * 2.0f, r), xs);
        map(r -> map(x -> x + 1.0f, r), doubled) }""")
    lowered = liftpy.rewrite.lower_to_opencl(program)
    executable = liftpy.compile(lowered.program, {})
    assert [k.launch.global_size for k in executable.generated.kernels] == [(6, 5), (6, 5)]
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    np.testing.assert_array_equal(executable.run({"xs": x}, poison=True).output, 2 * x + 1)


def test_the_command_line_splits_a_sum_into_a_stage(capsys):
    """``liftpy rewrite FILE --strategy "split_sum(4)"`` prints the program with its sum's chunks in a stage of
    their own, a program of the language that means what the original does."""
    from liftpy.cli import main

    assert main(["rewrite", str(PROGRAMS / "matmul.lift"), "--strategy", "split_sum(4)"]) == 0
    out = capsys.readouterr().out
    assert "partialReduce(4)" in out.splitlines()[0] and "hoist_stage" in out.splitlines()[0]
    program = liftpy.parse(out)
    assert "val partials" in liftpy.pretty(program)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
    _close(liftpy.evaluate(program, {"a": a, "b": b}, {"n": 3, "k": 8, "m": 5}), reference.matmul(a, b))


def test_a_map_bound_by_a_computing_val_is_not_a_parallel_level():
    """softmax's exponentials are a val that two computations read whole: made a parallel level (mapGlb(0)
    inside a row's work-item), each work-item held one exponential in private memory and summed the others'
    unwritten ones (the default configuration computed garbage). Every sampled configuration now agrees with
    numpy."""
    sizes = {"n": 3, "m": 10}
    space = RouteSpace(liftpy.load(Path(liftpy.__file__).parent / "nn" / "programs" / "softmax.lift"), sizes, None,
                       "softmax")
    x = (np.random.default_rng(0).standard_normal((3, 10)) * 3).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    for config in [example_config(space)] + space.sample(12, seed=1):
        got = liftpy.compile(space.lower(config), sizes, None, "softmax").run({"input": x}, poison=True).output
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-7), config


def test_a_padding_that_adds_nothing_leaves_only_the_view_and_the_copy():
    """A convolution padded by zero elements at its sizes (a 1x1 or unpadded layer of a network): reading the view
    branch-free (``pad_copy`` 3) is reading it -- the same kernels -- and a copy with the innermost dimension
    outermost (2) is the input copied as it lies, so the space holds 0 and 1 (the copy channels-last) only. A
    configuration recorded with 2 or 3 (a database from before) still lowers and computes numpy's sums."""
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 7, 6), (4, 3, 3, 3), (4,)])
    sizes = {"N": 2, "C": 3, "H": 7, "W": 6, "K": 4, "kernelHeight": 3, "kernelWidth": 3, "padSize": (0, 0, 0, 0),
             "stride": (2, 1)}
    expected = np.maximum(reference.conv2d_nchw(x, w, b, (2, 1), (0, 0, 0, 0)), 0)
    space = RouteSpace(liftpy.load(PROGRAMS / "conv_bias_relu.lift"), sizes)
    assert space.pads and not space.sketcher.padding and not space.rotates
    assert {s.pad_copy for s in space.structures()} == {0, 1}
    assert {c["pad_copy"] for c in space.sample(40, seed=1)} == {0, 1}
    viewed = {**example_config(space), "pad_copy": 0}
    assert space.valid({**viewed, "pad_copy": 1})
    assert not space.valid({**viewed, "pad_copy": 2}) and not space.valid({**viewed, "pad_copy": 3})
    sources = {c: [k.source for k in liftpy.compile(space.lower({**viewed, "pad_copy": c}), sizes).generated.kernels]
               for c in (0, 3)}
    assert sources[3] == sources[0]
    for c in (0, 1, 2, 3):
        _close(_run(space, {**viewed, "pad_copy": c}, {"input": x, "weights": w, "biases": b}, sizes), expected)
