"""Fault injection for the tuner's tests: a 'kernel' whose output is corrupted for some configurations."""


def corrupt_narrow_vectors(config, output):
    """Planted wrong results: every configuration with v == 2 returns a wrong element."""
    if config.get("v") == 2:
        output.flat[0] += 1.0
    return output
