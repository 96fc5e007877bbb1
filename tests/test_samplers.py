"""The search strategies, on a space of integers where the answer is known (no device: a strategy only
proposes and is told the results)."""

from liftpy.tuning import LocalSearch


class Line:
    """Configurations {"x": 0..99}; neighbours one step either side."""

    def sample(self, n, seed=0):
        import random

        xs = list(range(100))
        random.Random(seed).shuffle(xs)
        return [{"x": x} for x in xs[:n]]

    def neighbours(self, config):
        return [{"x": x} for x in (config["x"] - 1, config["x"] + 1) if 0 <= x < 100]


def _run(strategy, cost, trials, batch=1):
    """``trials`` proposals, ``batch`` at a time, each batch's results told after it."""
    seen = []
    while len(seen) < trials:
        proposed = strategy.propose(min(batch, trials - len(seen)))
        if not proposed:
            break
        for config in proposed:
            seen.append(config["x"])
        for config in proposed:
            strategy.observe(config, {"status": "ok", "time_ms": cost(config["x"])})
    return seen


def test_local_search_walks_downhill_from_the_best_random_trial():
    cost = lambda x: abs(x - 73) + 1.0  # noqa: E731 -- one minimum, at 73
    seen = _run(LocalSearch(Line(), trials=40, seed=1, first={"x": 0}, explore=0.25), cost, 40)
    assert seen[0] == 0 and len(set(seen)) == len(seen) == 40  # the default first, nothing twice
    assert 73 in seen  # found by walking: 10 random trials rarely hit it, the walk always does


def test_local_search_ignores_failed_trials_and_falls_back_to_random():
    strategy = LocalSearch(Line(), trials=100, seed=2, explore=0.1)
    seen = []
    while proposed := strategy.propose(7):
        seen += [config["x"] for config in proposed]
        for config in proposed:
            strategy.observe(config, {"status": "wrong", "time_ms": None})
    assert sorted(seen) == list(range(100))  # no neighbour of a wrong trial: every random one, each once


def test_local_search_proposes_its_starting_points_first_in_order():
    cost = lambda x: float(x)  # noqa: E731
    starts = [{"x": 50}, {"x": 7}, {"x": 93}]
    seen = _run(LocalSearch(Line(), trials=20, seed=3, first=starts), cost, 20)
    assert seen[:3] == [50, 7, 93] and len(set(seen)) == 20


def test_a_resumed_local_search_goes_on_from_the_best_measured_before():
    """A strategy told an earlier run's results (a resumed search) proposes its starting points, then walks
    from the best result so far at once: the earlier random trials count towards the random share."""
    cost = lambda x: abs(x - 73) + 1.0  # noqa: E731
    strategy = LocalSearch(Line(), trials=30, seed=4, first=[{"x": 0}], explore=0.5)
    for x in (10, 20, 30, 40, 50, 60, 70, 80, 90, 99, 5, 15, 25, 35, 45):  # 15 earlier results: the random share
        strategy.observe({"x": x}, {"status": "ok", "time_ms": cost(x)})
    seen = _run(strategy, cost, 6)
    assert seen[0] == 0 and 73 in seen and all(69 <= x <= 75 for x in seen[1:]), seen  # no random trial


def test_a_local_search_in_batches_still_walks_downhill_and_proposes_nothing_twice():
    """Proposed 8 at a time, each batch's results told only after it (the tuner builds ahead): the walk takes
    the neighbours of the best few so far at once (on this line, two each), and still finds the minimum."""
    cost = lambda x: abs(x - 73) + 1.0  # noqa: E731
    seen = _run(LocalSearch(Line(), trials=80, seed=1, first={"x": 0}, explore=0.25), cost, 80, batch=8)
    assert seen[0] == 0 and len(set(seen)) == len(seen) == 80 and 73 in seen
