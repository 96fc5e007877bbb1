"""The route's table of choices: one name per choice, shared by configurations, structures and sketches."""

import dataclasses

import liftpy
from liftpy.primitives import PRIMITIVES
from liftpy.rewrite.route import RouteSpace
from liftpy.rewrite.route.choices import CHOICES, Structure

from .test_programs import PROGRAMS, _case
from .route_configs import example_config


def test_every_choice_is_in_the_table_once_with_its_meaning_and_rewrite():
    names = [choice.name for choice in CHOICES]
    assert len(names) == len(set(names)) == 13
    assert all(choice.meaning and choice.rewrite and choice.kind in ("structure", "parameter", "side")
               for choice in CHOICES)


def test_a_configuration_has_exactly_the_tables_choices_and_a_block_per_level():
    inputs, sizes, _ = _case("conv1x1")
    space = RouteSpace(liftpy.load(PROGRAMS / "conv1x1.lift"), sizes)
    config = example_config(space)
    assert set(config) == {c.name for c in CHOICES} | {f"block.{level.name}" for level in space.levels}


def test_a_structures_fields_are_named_after_the_choices():
    fields = {f.name for f in dataclasses.fields(Structure)} - {"blocked"}
    assert fields <= {c.name for c in CHOICES if c.kind != "side"}
    assert {c.name for c in CHOICES if c.kind == "structure"} <= fields


def test_a_sketchs_numeric_choices_are_tuning_parameters_of_the_same_name():
    inputs, sizes, _ = _case("matmul")
    space = RouteSpace(liftpy.load(PROGRAMS / "matmul.lift"), sizes)
    config = next(c for c in space.sample(50, seed=1) if c["vector"] and c["partial"] == 0)
    structure, values = space.structure_of(config)
    assert values["vector"] == config["vector"]
    assert "vector" in space.sketch(structure).program.tuning_params


def test_the_route_asks_the_primitive_table_which_primitive_zips_and_which_groups():
    assert {name for name, p in PRIMITIVES.items() if p.zips} == {"zip"}
    assert {name for name, p in PRIMITIVES.items() if p.groups} == {"split"}
