"""The search's samplers, on a space of integers where the answer is known (no device: the sampler only
proposes and is told the results)."""

from liftpy.tuning import LocalSearchSampler


class Line:
    """Configurations {"x": 0..99}; neighbours one step either side."""

    def sample(self, n, seed=0):
        import random

        xs = list(range(100))
        random.Random(seed).shuffle(xs)
        return [{"x": x} for x in xs[:n]]

    def neighbours(self, config):
        return [{"x": x} for x in (config["x"] - 1, config["x"] + 1) if 0 <= x < 100]


def _run(sampler, cost, trials):
    seen = []
    for algorithm, config in sampler.proposals():
        if len(seen) == trials:
            break
        seen.append(config["x"])
        sampler.observe(algorithm, config, {"status": "ok", "time_ms": cost(config["x"])})
    return seen


def test_local_search_walks_downhill_from_the_best_random_trial():
    cost = lambda x: abs(x - 73) + 1.0  # noqa: E731 -- one minimum, at 73
    seen = _run(LocalSearchSampler("route", Line(), trials=40, seed=1, first={"x": 0}, explore=0.25), cost, 40)
    assert seen[0] == 0 and len(set(seen)) == len(seen) == 40  # the default first, nothing twice
    assert 73 in seen  # found by walking: 10 random trials rarely hit it, the walk always does


def test_local_search_ignores_failed_trials_and_falls_back_to_random():
    sampler = LocalSearchSampler("route", Line(), trials=100, seed=2, explore=0.1)
    seen = []
    for algorithm, config in sampler.proposals():
        seen.append(config["x"])
        sampler.observe(algorithm, config, {"status": "wrong", "time_ms": None})
    assert sorted(seen) == list(range(100))  # no neighbour of a wrong trial: every random one, each once


def test_local_search_proposes_its_starting_points_first_in_order():
    cost = lambda x: float(x)  # noqa: E731
    starts = [{"x": 50}, {"x": 7}, {"x": 93}]
    seen = _run(LocalSearchSampler("route", Line(), trials=20, seed=3, first=starts), cost, 20)
    assert seen[:3] == [50, 7, 93] and len(set(seen)) == 20


def test_a_resumed_local_search_goes_on_from_the_best_measured_before():
    """A sampler told an earlier run's results (a resumed search) proposes its starting points, then walks
    from the best result so far at once: the earlier random trials count towards the random share."""
    cost = lambda x: abs(x - 73) + 1.0  # noqa: E731
    sampler = LocalSearchSampler("route", Line(), trials=30, seed=4, first=[{"x": 0}], explore=0.5)
    for x in (10, 20, 30, 40, 50, 60, 70, 80, 90, 99, 5, 15, 25, 35, 45):  # 15 earlier results: the random share
        sampler.observe("route", {"x": x}, {"status": "ok", "time_ms": cost(x)})
    seen = _run(sampler, cost, 6)
    assert seen[0] == 0 and 73 in seen and all(69 <= x <= 75 for x in seen[1:]), seen  # no random trial
