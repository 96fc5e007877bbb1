"""What the cost model reads of a candidate (liftpy.tuning.features), against counts derived by hand from the
problem: a product of M x K by K x N makes M*N*K multiply-adds, a convolution one per output, input channel
and kernel tap, however the candidate blocks, vectorises or pads them (a candidate summing partial sums
updates each output a few times more)."""

import math
from pathlib import Path

import pytest

from liftpy import nn
from liftpy.device import Device
from liftpy.tuning import ProgramTask
from liftpy.tuning.builder import Build, build_candidate
from liftpy.tuning.features import NAMES, PREFETCHED_STREAMS, program_features
from .route_configs import example_config, example_configs

PROGRAMS = Path(__file__).resolve().parent.parent / "examples" / "programs"
CPU = Device(name="a CPU", kind="cpu", compute_units=2, max_work_group_size=4096,
             max_work_item_sizes=(4096, 4096, 4096), local_mem_size=2**16, preferred_vector_width_float=8,
             private_mem_budget=512)


def generated_candidates(task, count, seed=0):
    space = task.space(CPU)
    configs = [*example_configs(space)[:2], *space.sample(count, seed=seed)]
    for config in configs[:count]:
        built = build_candidate(Build(task.portable(), CPU, task.complete(config)))
        if built.failure is None:
            yield config, built.generated


def split(config) -> bool:
    """Whether a configuration splits its reduction into partial sums (``chunk``, ``partial``): their sum
    updates each output once more per part."""
    return bool(config.get("chunk") or config.get("partial"))


def test_every_candidate_of_a_product_makes_m_n_k_multiply_adds():
    n, m, k = 64, 48, 32
    task = ProgramTask.make(PROGRAMS / "matmul.lift", {"n": n, "m": m, "k": k})
    seen = 0
    for config, generated in generated_candidates(task, 8):
        features = program_features(generated, CPU)
        if split(config):  # partial sums, then their sum: a few more updates, the multiply-adds the same
            assert m * n * k < features["reduction_updates"] <= 2 * m * n * k, config
        else:
            assert features["reduction_updates"] == m * n * k, config
            assert features["reduction_chain"] == k, config  # each output waits on its k updates in turn
        assert features["global_written_bytes"] >= 4 * m * n
        seen += 1
    assert seen >= 4


@pytest.mark.parametrize("padding", [0, 1])
def test_every_candidate_of_a_convolution_makes_one_multiply_add_per_output_channel_and_tap(padding):
    """Padded or not: a border's branch makes as many updates as the interior's, guarded reads giving zeros."""
    c, h, w, k, r = 8, 10, 10, 16, 3
    layer = nn.make_layer(input_shape=(c, h, w), kernel_shape=(k, r, r), stride=1, padding=padding)
    out = (h + 2 * padding - r + 1) * (w + 2 * padding - r + 1)
    seen = 0
    for config, generated in generated_candidates(nn.route_task(layer), 8):
        features = program_features(generated, CPU)
        assert features["reduction_updates"] >= k * out * c * r * r, config
        if not config.get("round_up") and not split(config):  # a rounded-up map computes outputs it then crops
            assert features["reduction_updates"] == k * out * c * r * r, config
            assert features["reduction_chain"] == c * r * r, config
        seen += 1
    assert seen >= 4


def test_the_features_are_named_and_read_the_device():
    task = nn.route_task(nn.make_layer(input_shape=(8, 10, 10), kernel_shape=(16, 3, 3), stride=1, padding=1))
    (config, generated), = list(generated_candidates(task, 1))
    features = program_features(generated, CPU)
    assert tuple(features) == NAMES and all(math.isfinite(v) for v in features.values())
    assert features["compute_units"] == 2 and features["preferred_vector"] == 8 and features["is_cpu"] == 1
    wide = program_features(generated, Device(**{**CPU.__dict__, "compute_units": 8}))
    assert wide["groups_per_unit"] == pytest.approx(features["groups_per_unit"] / 4)
    launch = generated.kernels[-1].launch
    assert features["work_items"] >= math.prod(launch.global_size)


def test_a_register_block_is_read_from_the_configuration():
    """A convolution's block of 8 kernels (in vectors of 4 lanes: the outer level's) by 4 windows keeps 8*4/4 = 8
    vector accumulators (8/16 of the registers of a CPU with 8-lane vectors) and loads 8/4 + 4 = 6 values a step;
    in vectors of 16 lanes, each two of its registers; unblocked, one accumulator and two loads (a weight, an
    input)."""
    from liftpy.tuning.features import CHOICE_NAMES, choice_features

    task = nn.route_task(nn.make_layer(input_shape=(8, 10, 10), kernel_shape=(16, 3, 3), stride=1, padding=0))
    space = task.space(CPU)
    outer, inner = space.levels[0], space.levels[-1]
    assert (outer.extent, inner.extent) == (16, 8)  # kernels, then a row's windows
    config = task.complete({outer.key: 8, inner.key: 4, "vector": 4, "vector_outer": 1, "unroll": 1,
                            "parallel": 2})
    features = choice_features(space, config, CPU)
    assert tuple(features) == CHOICE_NAMES
    assert (features["block_outer"], features["block_inner"], features["block_outputs"]) == (8, 4, 32)
    assert features["accumulators"] == 8 and features["accumulator_share"] == 8 / 16
    assert features["step_loads"] == 8 / 4 + 4 and features["loads_per_update"] == 6 / 8
    assert (features["vector"], features["vector_outer"], features["parallel"]) == (4, 1, 2)
    wide = choice_features(space, {**config, "vector": 16, outer.key: 16}, CPU)  # a vector takes two registers
    assert (wide["accumulators"], wide["step_loads"]) == (16 / 16 * 4 * 2, 16 / 16 * 2 + 4)
    plain = choice_features(space, task.complete({"parallel": 2}), CPU)
    assert (plain["blocked_levels"], plain["accumulators"], plain["step_loads"]) == (0, 1, 2)


@pytest.mark.parametrize("block, vector, vector_outer, loads_per_update", [
    ((1, 1), 0, 0, 2.0),          # unblocked: a weight and an input per multiply-add
    ((8, 4), 0, 0, (8 + 4) / 32),  # a scalar block of 8 kernels x 4 windows: 12 loads a step of 32 updates
    ((8, 4), 4, 1, (8 + 4) / 8),   # kernels in gathered vectors of 4: 8 lanes loaded one by one, 4 inputs
])
def test_the_loads_of_a_step_are_counted_once_each(block, vector, vector_outer, loads_per_update):
    """A step of a register block loads each weight and input it uses once, however many updates read it (the C
    compiler keeps it in a register); counted by hand from the block, against the features of the kernels."""
    task = nn.route_task(nn.make_layer(input_shape=(8, 10, 10), kernel_shape=(16, 3, 3), stride=1, padding=0))
    space = task.space(CPU)
    outer, inner = space.levels[0], space.levels[-1]
    config = {**dict.fromkeys(example_config(space), 0), outer.key: block[0], inner.key: block[1], "parallel": 2,
              "unroll": int(block != (1, 1)), "vector": vector, "vector_outer": vector_outer}
    built = build_candidate(Build(task.portable(), CPU, config))
    assert built.failure is None, built.failure
    features = built.features
    assert features["update_instructions"] == 16 * 8 * 8 * 8 * 9 // max(1, vector)
    # within 1%: the few loads outside the steps
    assert features["loads_per_update_instruction"] == pytest.approx(loads_per_update, rel=0.01)


@pytest.mark.parametrize("n, m, k, far", [(64, 48, 32, 0), (4, 1024, 8, 4 * 1024 * 8)])
def test_the_cache_lines_a_step_brings_are_counted_from_its_addresses(n, m, k, far):
    """An unblocked product's work-item (i, j) reads a row of ``a`` along its reduction, 4 bytes a step (one pass
    of ``k`` steps spans ``ceil(4k / 64)`` lines), and a column of ``b``, ``4m`` bytes a step: a new line each
    step (and a new page where ``4m >= 4096``)."""
    task = ProgramTask.make(PROGRAMS / "matmul.lift", {"n": n, "m": m, "k": k})
    config = {**dict.fromkeys(example_config(task.space(CPU)), 0), "parallel": 2}
    built = build_candidate(Build(task.portable(), CPU, config))
    assert built.failure is None, built.failure
    assert built.features["cache_lines"] == n * m * (math.ceil(4 * k / 64) + k)
    assert built.features["far_loads"] == far
    assert built.features["lines_per_update"] == pytest.approx((math.ceil(4 * k / 64) + k) / k)


def test_a_cpus_compiler_vectorises_an_innermost_loop_of_accumulators_in_memory():
    """Max pooling (3x3, stride 2) of 4 channels of 33 x 33: 16 x 16 outputs a channel, 9 taps each. A row of 16
    outputs as a loop over an array of accumulators (not unrolled): on a CPU preferring 8 lanes, the compiler
    runs it as 2 vector steps a tap, an update instruction each, loading the accumulators (1 vector) and the
    input that moves by 2 elements a step (2 vectors); unrolled into 16 registers it updates one a time, as it
    does on a GPU, whose compiler vectorises no loop. The array's outputs are then read once each to be
    stored."""
    task = ProgramTask.make(Path(nn.__file__).parent / "programs" / "max_pool.lift",
                            {"N": 1, "C": 4, "H": 33, "W": 33, "poolSize": (3, 3), "padSize": (0, 0, 0, 0),
                             "stride": (2, 2)})
    gpu = Device(**{**CPU.__dict__, "name": "a GPU", "kind": "gpu"})
    updates = 4 * 16 * 16 * 9
    for unroll in (0, 1):
        config = task.complete({"parallel": 2, "sequential_outer": 1, "unroll": unroll, "local_size": 0,
                                "block.window": 16})
        assert task.space(CPU).valid(config), config
        for device in (CPU, gpu):
            built = build_candidate(Build(task.portable(), device, config))
            assert built.failure is None, built.failure
            features = built.features
            assert features["reduction_updates"] == updates
            compiled = unroll == 0 and device is CPU  # the block an array whose 16 the compiler takes 8 at a time
            assert features["accumulators"] == (2 if compiled else 16)
            assert features["accumulator_share"] == (0 if compiled else 16 / 16)  # no register holds the array
            copied_out = 4 * 16 * 16 if unroll == 0 else 0  # each output read from the array once, to be stored
            if unroll == 0 and device is CPU:
                assert features["update_instructions"] == updates / 8
                assert features["load_instructions"] == updates / 8 + updates * 2 / 8 + copied_out
            else:
                assert features["update_instructions"] == updates
                assert features["load_instructions"] == (2 if unroll == 0 else 1) * updates + copied_out


@pytest.mark.parametrize("rows", [1, 4, 8, 64])
def test_a_step_that_walks_several_rows_reads_as_many_streams(rows):
    """A fully connected layer (1 x 512 by 64 x 512) whose work-item sums ``rows`` weight rows at once: each step
    reads ``rows`` rows of the weights and the input's row, ``rows + 1`` streams; its ``64 / rows`` work-items'
    steps bring ``rows + 1`` rows of 32 lines each, ``32 (64 / rows)`` lines a stream (beside their biases' few
    lines, read before the loop). Of those, each buffer's lines come from memory once (the weights' 2048, the
    input's 32, the biases' 4), a step's streams from memory its ``rows`` weight rows (the input's row, read by
    every work-item, comes from memory once in ``64 / rows``): ``2048 / rows`` lines from memory a stream -- but
    a step of 64 rows reads more streams than a core's prefetchers follow: it waits on each of its lines."""
    task = ProgramTask.make(Path(nn.__file__).parent / "programs" / "gemm_clip.lift", {"n": 1, "k": 512, "m": 64})
    config = task.complete({**task.space(CPU).plain(), "parallel": 1, "block.weightRow": rows,
                            "unroll": int(rows > 1)})
    built = build_candidate(Build(task.portable(), CPU, config))
    assert built.failure is None, built.failure
    features = built.features
    assert features["stream_lines"] == pytest.approx(32 * 64 / rows, abs=4)
    assert features["streams"] == pytest.approx(rows + 1, rel=0.01)
    assert features["cache_lines"] == pytest.approx(32 * 64 / rows * (rows + 1), abs=64)  # biases: a line a row at most
    assert features["memory_lines"] == 2048 + 32 + 4
    followed = rows + 1 <= PREFETCHED_STREAMS
    assert features["memory_stream_lines"] == pytest.approx(2048 / rows if followed else 2048 + 32 + 4, abs=8)
