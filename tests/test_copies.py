"""Copies made on purpose, the catalogue's strategies of ``rewrites/copies.py``: ``relayout`` (an input read from a
copy with its outer dimension innermost) and ``copy_padding`` (the padded input copied by a kernel of its own).
Each rewritten program means what the original means (against numpy) and its copy kernel has the layout asked for.
"""

import re

import numpy as np

import liftpy
from liftpy.ir import Let, Var


# ------------------------------------------------------------------------------------------------ relayout
def test_relayout_reads_an_input_from_a_copy_with_its_outer_dimension_innermost():
    """The other direction: an input copied once with its outer dimension innermost, read back through a view
    of the copy. The program means the same (each of a 3D input's elements times its row index, against
    numpy), and its copy kernel writes the outer dimension side by side."""
    from liftpy.catalogue.copies import relayout

    program = liftpy.parse("""def f(xs: [[[float]_c]_b]_a, ys: [float]_a) =
        map((x, y) -> map(row -> map(e -> e * y, row), x), zip(xs, ys))""")
    rng = np.random.default_rng(5)
    xs, ys = rng.standard_normal((3, 4, 5)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    result = relayout("xs")(program)
    assert result, result
    relaid = result.program
    assert isinstance(relaid.main.body, Let) and list(relaid.main.body.pattern.names()) == ["xsT"]
    expected = xs * ys[:, None, None]
    sizes = {"a": 3, "b": 4, "c": 5}
    np.testing.assert_allclose(liftpy.evaluate(relaid, {"xs": xs, "ys": ys}, sizes), expected, rtol=1e-6)
    lowered = liftpy.rewrite.lower_to_opencl(relaid)
    executable = liftpy.compile(lowered.program, sizes)
    copy = executable.generated.kernels[0]
    assert "xsT[gid0+3*gid1]" in copy.source.replace(" ", ""), copy.source
    np.testing.assert_allclose(executable.run({"xs": xs, "ys": ys}, poison=True).output, expected, rtol=1e-6)
    tiled = relayout("xs", tile=3)(liftpy.parse("""def f(xs: [[[float]_c]_b]_a, ys: [float]_a) =
        map((x, y) -> map(row -> map(e -> e * y, row), x), zip(xs, ys))"""))  # blocks of 3 of the 6 rows of xs
    xs6, ys6 = rng.standard_normal((6, 4, 5)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    executable = liftpy.compile(liftpy.rewrite.lower_to_opencl(tiled.program).program, {"a": 6, "b": 4, "c": 5})
    copy = executable.generated.kernels[0]  # [a/3][b*c][3]: a block's three rows side by side, block after block
    assert copy.launch.global_size == (3, 20, 2) and "xsT[gid0+3*gid1+60*gid2]" in copy.source.replace(" ", "")
    np.testing.assert_allclose(executable.run({"xs": xs6, "ys": ys6}, poison=True).output, xs6 * ys6[:, None, None],
                               rtol=1e-6)
    assert not relayout("ys")(program) and "two or more dimensions" in relayout("ys")(program).reason
    assert not relayout("zs")(program) and "no input zs" in relayout("zs")(program).reason


def test_relayout_holds_each_element_in_the_order_the_program_reads_it():
    """Where every element of the input is read through one view that only rearranges it (a kernel's weights
    read channels-last), the copy holds each element in that order: the sum then walks the copy one tile at a
    time, where the element's own order would jump. Same values (numpy's weighted sums of each matrix read by
    columns); a program reading an element through two different views keeps the element's own order."""
    from liftpy.catalogue.copies import element_reads, relayout

    by_columns = liftpy.parse("""def f(xs: [[[float]_c]_b]_a, ws: [float]_(b*c)) =
        map(x -> reduce(0.0f, (acc, p) -> acc + p._1 * p._2, zip(join(transpose(x)), ws)), xs)""")
    ((read, element),) = element_reads(by_columns.main.body, "xs")
    assert str(read) == "join(transpose(x))" and element == Var("x")
    relaid = relayout("xs", tile=2)(by_columns)
    assert relaid, relaid
    rng = np.random.default_rng(11)
    xs, ws = rng.standard_normal((4, 3, 5)).astype(np.float32), rng.standard_normal(15).astype(np.float32)
    expected = np.einsum("aij,ji->a", xs.astype(np.float64), ws.reshape(5, 3).astype(np.float64))
    sizes = {"a": 4, "b": 3, "c": 5}
    np.testing.assert_allclose(liftpy.evaluate(relaid.program, {"xs": xs, "ws": ws}, sizes).reshape(4), expected,
                               rtol=1e-5)  # a reduce gives an array of one sum
    executable = liftpy.compile(liftpy.rewrite.lower_to_opencl(relaid.program).program, sizes)
    copy, compute = executable.generated.kernels
    assert "xsT[gid0+2*gid1+30*gid2]=xs[15*gid0+30*gid2+gid1/3+5*(gid1%3)]" in copy.source.replace(" ", "")
    assert "xsT[2*j+" in compute.source.replace(" ", ""), compute.source  # step j: the next tile of the copy
    np.testing.assert_allclose(executable.run({"xs": xs, "ws": ws}, poison=True).output.reshape(4), expected, rtol=1e-5)

    two_views = liftpy.parse("""def f(xs: [[[float]_b]_b]_a) =
        map(x -> reduce(0.0f, (acc, p) -> acc + p._1 * p._2, zip(join(transpose(x)), join(x))), xs)""")
    assert element_reads(two_views.main.body, "xs") is None
    kept = relayout("xs", tile=2)(two_views)
    squares = rng.standard_normal((4, 3, 3)).astype(np.float32)
    executable = liftpy.compile(liftpy.rewrite.lower_to_opencl(kept.program).program, {"a": 4, "b": 3})
    assert "xsT[gid0+2*gid1+18*gid2]=xs[9*gid0+gid1+18*gid2]" in executable.generated.kernels[0].source.replace(" ", "")
    np.testing.assert_allclose(executable.run({"xs": squares}, poison=True).output.reshape(4),
                               np.einsum("aij,aij->a", squares.astype(np.float64), squares.transpose(0, 2, 1)),
                               rtol=1e-5)


# ------------------------------------------------------------------------------------------------ copy_padding
def test_copy_padding_copies_the_padded_rows_once_and_reads_the_copy():
    """The other direction of inline_copies for padding: each row's padded view copied by a kernel of its own
    (walking the map over the rows), the window sums read from the copy -- numpy's sums of three neighbours
    with a zero at each end. A row read beside its padding, or a program that pads nothing, is refused."""
    from liftpy.catalogue.copies import copy_padding

    program = liftpy.parse("""def f(xs: [[float]_n]_m) =
        map(x -> map(w -> reduce(0.0f, (a, e) -> a + e, w), slide(3, 1, pad(1, 1, 0.0f, x))), xs)""")
    result = copy_padding()(liftpy.rewrite.lower_to_opencl(program).program)
    assert result, result
    copied = result.program
    assert list(copied.main.body.pattern.names()) == ["padded"]
    xs = np.random.default_rng(6).standard_normal((4, 9)).astype(np.float32)
    padded = np.pad(xs, ((0, 0), (1, 1)))
    expected = padded[:, :-2] + padded[:, 1:-1] + padded[:, 2:]
    executable = liftpy.compile(copied, {"m": 4, "n": 9})
    copy, main = executable.generated.kernels
    assert copy.produces == "padded" and "xs" not in main.args
    output = executable.run({"xs": xs}, poison=True).output  # a reduction yields an array of one
    np.testing.assert_allclose(output[..., 0], expected, rtol=1e-5, atol=1e-6)
    beside = liftpy.parse("""def f(xs: [[float]_n]_m) =
        map(x -> zip(x, map(w -> reduce(0.0f, (a, e) -> a + e, w), slide(3, 1, pad(1, 1, 0.0f, x)))), xs)""")
    refused = copy_padding()(beside)
    assert not refused and "read beside" in refused.reason
    none = copy_padding()(liftpy.parse("def f(xs: [float]_n) = map(x -> x * 2.0f, xs)"))
    assert not none and "no padded view" in none.reason


def test_copy_padding_gives_each_work_item_a_row_of_a_padded_plane():
    """A plane padded on four sides (a channel of a depthwise convolution): the copy walks the channels and
    the rows over work-items and each row sequentially, so that a row's middle, clear of the padding, is a
    plain loop.
    The sums of 3 x 3 windows then read the copy: numpy's sums over the zero-padded planes."""
    from liftpy.catalogue.copies import copy_padding

    program = liftpy.parse("""def f(xs: [[[float]_w]_h]_c) =
        map(x -> map(row -> map(win -> reduce(0.0f, (a, e) -> a + e, join(win)), row),
                     slide2D((3, 3), (1, 1), pad2D((1, 1, 1, 1), value = 0, x))), xs)""")
    result = copy_padding()(liftpy.rewrite.lower_to_opencl(program).program)
    assert result, result
    xs = np.random.default_rng(7).standard_normal((3, 6, 9)).astype(np.float32)
    executable = liftpy.compile(result.program, {"c": 3, "h": 6, "w": 9})
    copy = executable.generated.kernels[0]
    assert copy.produces == "padded"
    source = executable.sources[copy.name]
    assert "get_global_id(2)" not in source and re.search(r"for \((int|long) i = 1; i < 10; i\+\+\)", source)
    padded = np.pad(xs, ((0, 0), (1, 1), (1, 1)))
    expected = sum(padded[:, dy:dy + 6, dx:dx + 9] for dy in range(3) for dx in range(3))
    output = executable.run({"xs": xs}, poison=True).output
    np.testing.assert_allclose(output.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


def test_copy_padding_rotated_keeps_a_channels_last_image_in_its_own_order():
    """An image padded channels-last, copied rotated: the copy holds the channels outermost (the image's own
    order, 4 x 7 x 9), each work-item copying a row whose middle is a plain stride-1 loop, and the windows read
    it through the view that turns it back. The windows' sums over their channels are numpy's over the
    zero-padded image; the copy as read (channels innermost) gives the same. A padded vector has no
    dimension to rotate."""
    from liftpy.catalogue.copies import copy_padding

    program = liftpy.parse("""def f(image: [[[float]_w]_h]_c) =
        map(row -> map(win -> reduce(0.0f, (a, e) -> a + e, join(join(win))), row),
            slide2D((3, 3), (1, 1), pad2D((1, 1, 1, 1), value = 0, channelsLast(image))))""")
    lowered = liftpy.rewrite.lower_to_opencl(program).program
    image = np.random.default_rng(8).standard_normal((4, 5, 7)).astype(np.float32)
    padded = np.pad(image, ((0, 0), (1, 1), (1, 1)))
    expected = sum(padded[:, dy:dy + 5, dx:dx + 7] for dy in range(3) for dx in range(3)).sum(axis=0)
    layouts = {}
    for rotate in (False, True):
        result = copy_padding(rotate=rotate)(lowered)
        assert result, result
        executable = liftpy.compile(result.program, {"c": 4, "h": 5, "w": 7})
        copy = executable.generated.kernels[0]
        layouts[rotate] = executable.generated.buffer(copy.produces).shape
        if rotate:
            assert re.search(r"for \((int|long) i = 1; i < 8; i\+\+\)", executable.sources[copy.name])
            assert "image[7*gid0+35*gid1+i-8]" in executable.sources[copy.name]
        output = executable.run({"image": image}, poison=True).output
        np.testing.assert_allclose(output.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
    assert layouts == {False: (7, 9, 4), True: (4, 7, 9)}
    vector = liftpy.parse("""def f(xs: [float]_n) =
        map(w -> reduce(0.0f, (a, e) -> a + e, w), slide(3, 1, pad(1, 1, 0.0f, xs)))""")
    refused = copy_padding(rotate=True)(liftpy.rewrite.lower_to_opencl(vector).program)
    assert not refused and "one layout" in refused.reason


def test_copy_padding_transposes_a_channels_last_copy_in_tiles():
    """Copied channels-last (not rotated), each pixel's channels sit planes apart in the image: given the sizes,
    the copy is a tiled transpose -- a work-item copies one pixel's tile of 8 channels (of 24), its neighbours
    in dimension 0 the next pixels of the row -- written back through views into the channels-last layout.
    The windows' sums are numpy's; without sizes, with fewer than 8 channels, or with channels in the image's
    own order, the copy stays a pixel (or a row) per work-item. source_dimensions says which dimension of the image each dimension
    of a view walks."""
    from liftpy.catalogue.copies import copy_padding, source_dimensions

    program = liftpy.parse("""def f(image: [[[float]_w]_h]_c) =
        map(row -> map(win -> reduce(0.0f, (a, e) -> a + e, join(join(win))), row),
            slide2D((3, 3), (1, 1), pad2D((1, 1, 1, 1), value = 0, channelsLast(image))))""")
    lowered = liftpy.rewrite.lower_to_opencl(program).program
    sizes = {"c": 24, "h": 5, "w": 7}
    image = np.random.default_rng(9).standard_normal((24, 5, 7)).astype(np.float32)
    padded = np.pad(image.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    expected = sum(padded[:, dy:dy + 5, dx:dx + 7] for dy in range(3) for dx in range(3)).sum(axis=0)
    tiled = copy_padding(sizes=sizes)(lowered)
    assert tiled, tiled
    executable = liftpy.compile(tiled.program, sizes)
    copy = executable.generated.kernels[0]
    source = executable.sources[copy.name].replace(" ", "")
    assert copy.launch.global_size == (9, 3, 7) and "i<8;" in source, source  # 9 columns, 3 tiles, 7 rows
    assert "padded[24*gid0+8*gid1+216*gid2+i]" in source  # channels-last: pixel, tile, channel in the tile
    assert executable.generated.buffer(copy.produces).shape == (7, 9, 24)
    output = executable.run({"image": image}, poison=True).output
    np.testing.assert_allclose(output.reshape(expected.shape), expected, rtol=1e-5, atol=1e-4)
    untiled = liftpy.compile(copy_padding()(lowered).program, sizes)
    assert untiled.generated.kernels[0].launch.global_size == (9, 7)  # a pixel's 24 channels each
    rotated = liftpy.compile(copy_padding(rotate=True, sizes=sizes)(lowered).program, sizes)
    assert rotated.generated.kernels[0].launch.global_size[:2] == (7, 24)  # a row each, as before
    few = liftpy.compile(copy_padding(sizes={**sizes, "c": 3})(lowered).program, {**sizes, "c": 3})
    assert few.generated.kernels[0].launch.global_size == (9, 7)  # 3 channels: a pixel's each, as before

    def walks(text: str):
        return source_dimensions(liftpy.parse(f"def g(x: [[[float]_w]_h]_c) = {text}").main.body, {"x": (0, 1, 2)})

    assert walks("pad2D((1, 1, 1, 1), value = 0, channelsLast(x))") == (1, 2, 0)  # channels innermost
    assert walks("pad2D((1, 1, 1, 1), value = 0, x)") == (0, 1, 2)
    assert walks("join(x)") is None  # not a transpose, padding or map of them
