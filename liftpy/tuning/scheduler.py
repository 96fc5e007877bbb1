"""The task scheduler: one budget of trials over many tasks, each batch where the total time gains the most.

What is tuned is a set of *groups* (a network's layers, a program): each runs ``weight`` times per call of the
whole, computed by one of its *alternatives* (a layer's direct or Winograd program), each alternative a sum of
tasks (its stages). The total time is ``sum over groups of weight x min over alternatives of the sum of the
alternative's per-call tasks' best times``. After every task has had a first batch, the next batch goes to the
task whose next batch is expected to lower that total the most -- Ansor's gradient scheduler (Zheng et al.,
OSDI'20, section 6):

    expected drop of task i's best over n more trials
        d_i = n * alpha * (g_i(t_i - w) - g_i(t_i)) / w
              + (1 - alpha) * max(n * g_i(t_i) / t_i, g_i(t_i) - beta * C_i / V_i) * b_i / t_i

(``g_i(t)``: its best after t trials, ``w``: the window, one batch, ``b_i``: the trial that found its best; the
first term the recent improvement, the second the larger of Ansor's optimistic guess ``g/t`` and its similar
tasks' term: ``C_i`` the task's multiply-adds a call, ``V_i`` the best throughput (multiply-adds per ms) of the
tasks of the same program (:attr:`Slot.family`; a network's other convolutions), so that a task far slower than
its kin at its size -- under 1/beta of their throughput -- is expected to close part of the gap. Both scaled by
``b/t``: a task whose best came early and has not moved since is expected to move less -- the soft form of
Ansor's per-task early stopping), and the gain of the whole is
``weight x max(0, group's best - (its alternative's time - d_i))``: a task of the fastest alternative gains
``weight x d_i``, a task of a slower one only what it could take below the fastest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the weight of the recent improvement against the optimistic guess (Ansor's alpha)
ALPHA = 0.2
#: how far below its similar tasks' best throughput a task is expected to stay (Ansor's beta): the similar
#: tasks' term counts only the time above beta times what that throughput would give
BETA = 2.0
#: a slot's first batch, at most: the trials its search's own opinions take (the best of the device's most
#: similar task, the analytic model's pick, the learned model's); the rest of the budget goes where the total
#: gains most, not evenly (benchmarks/results/networks-tuning-budget-b42541d-zen3.txt)
FIRST_TRIALS = 3


@dataclass(frozen=True)
class Slot:
    """One task in the set tuned: the ``group`` it belongs to, its ``alternative`` in the group ('' where the
    group has one), the group's ``weight`` (calls per call of the whole), whether it runs on every call
    (``per_call``; False: a stage run once when the program is prepared, whose speed costs nothing per call),
    and at most ``cap`` trials. Slots of one ``family`` (the same program and stage; '' for none) are similar
    tasks: their throughputs are compared."""

    task: object
    group: int = 0
    alternative: str = ""
    weight: float = 1.0
    per_call: bool = True
    cap: int | None = None
    family: str = ""


@dataclass
class _State:
    trials: int = 0
    bests: list[float | None] = field(default_factory=list)  # the best after each trial (None: none correct yet)
    spent: bool = False  # its strategy has nothing more to propose
    work: float | None = None  # multiply-adds a call (the fewest a trial reported: rounding adds some)

    @property
    def best(self) -> float | None:
        return self.bests[-1] if self.bests else None


class TaskScheduler:
    """Chooses which slot gets the next batch of ``batch`` trials, within ``budget`` trials in all (trials
    measured by an earlier run count, as :meth:`observe` is told them)."""

    def __init__(self, slots: list[Slot], budget: int, batch: int = 8):
        self.slots, self.budget, self.batch = slots, budget, batch
        self.states = [_State() for _ in slots]
        self.pending = [0] * len(slots)  # trials handed out, not yet observed

    @property
    def spent(self) -> int:
        return sum(s.trials for s in self.states) + sum(self.pending)

    def observe(self, index: int, time_ms: float | None, handed: bool = True, work: float | None = None) -> None:
        """A trial of slot ``index`` finished (``time_ms``: its time if correct); ``handed``: it was handed out
        by :meth:`next` (else an earlier run's); ``work``: the multiply-adds its kernels do a call, where known."""
        state = self.states[index]
        if handed:
            self.pending[index] -= 1
        state.trials += 1
        if work:
            state.work = work if state.work is None else min(state.work, work)
        best = state.best
        if time_ms is not None and (best is None or time_ms < best):
            best = time_ms
        state.bests.append(best)

    def give_back(self, index: int, count: int) -> None:
        """``count`` trials handed out that will not be measured (the strategy had fewer, or they were measured)."""
        self.pending[index] -= count

    def exhausted(self, index: int) -> None:
        """Slot ``index``'s strategy has nothing more to propose."""
        self.states[index].spent = True

    def _room(self, index: int) -> int:
        slot, state = self.slots[index], self.states[index]
        if state.spent:
            return 0
        room = self.budget - self.spent
        if state.trials + self.pending[index] == 0:  # never tried (a network's new step): its first trial, even
            room = max(room, 1)                      # where the database's trials have spent the budget
        if slot.cap is not None:
            room = min(room, slot.cap - state.trials - self.pending[index])
        return max(0, room)

    def next(self) -> tuple[int, int] | None:
        """The slot to tune next and how many trials to give it; None when the budget is spent."""
        open_ = [i for i in range(len(self.slots)) if self._room(i) > 0]
        if not open_:
            return None
        # every slot's first batch first, in order; then a stage run once gets the rest of its few trials
        first = [i for i in open_ if self.states[i].trials + self.pending[i] == 0]
        once = [i for i in open_ if not self.slots[i].per_call]
        chosen = first[0] if first else once[0] if once else max(open_, key=lambda i: (self.gain(i), -i))
        count = min(self.batch, self._room(chosen))
        if first:  # a first batch: a few trials, and room for the other slots' first ones
            count = min(count, FIRST_TRIALS, max(1, (self.budget - self.spent) // len(first)))
        self.pending[chosen] += count
        return chosen, count

    def _alternative_ms(self, group: int, alternative: str) -> float | None:
        times = [self.states[i].best for i, s in enumerate(self.slots)
                 if s.group == group and s.alternative == alternative and s.per_call]
        return None if not times or None in times else sum(times)

    def expected_drop(self, index: int, n: int | None = None) -> float:
        """``d_i`` of the module's docstring: how much slot ``index``'s best is expected to drop in ``n`` more
        trials (a batch)."""
        state, n = self.states[index], n or self.batch
        if state.best is None or state.trials == 0:
            return 0.0
        window = min(self.batch, state.trials)
        before = state.bests[-1 - window] if len(state.bests) > window else None
        recent = (before - state.best) / window if before is not None else 0.0
        found = next(t for t, best in enumerate(state.bests, 1) if best == state.best)
        guess = max(n * state.best / state.trials, self._behind_kin(index))
        return n * ALPHA * recent + (1 - ALPHA) * guess * found / state.trials

    def _behind_kin(self, index: int) -> float:
        """How far slot ``index``'s best lies above BETA times the time its family's best throughput would give
        its work (0 without a family, or work, or kin measured)."""
        slot, state = self.slots[index], self.states[index]
        if not slot.family or not state.work:
            return 0.0
        rates = [s.work / s.best for i, s in enumerate(self.states)
                 if self.slots[i].family == slot.family and s.work and s.best]
        return max(0.0, state.best - BETA * state.work / max(rates)) if rates else 0.0

    def gain(self, index: int) -> float:
        """The expected drop of the total time from a batch of slot ``index``'s (the module's docstring). A slot
        with no correct trial yet is worth its group's time (all of it could be won), less with every trial."""
        slot, state = self.slots[index], self.states[index]
        alternatives = {s.alternative for s in self.slots if s.group == slot.group}
        times = [t for a in alternatives if (t := self._alternative_ms(slot.group, a)) is not None]
        group_best = min(times, default=None)
        mine = self._alternative_ms(slot.group, slot.alternative)
        if mine is None:  # this alternative has no time yet: optimistic, as the whole group's, fading
            if group_best is None:
                return float("inf")
            return slot.weight * group_best / (1 + state.trials)
        return slot.weight * max(0.0, group_best - (mine - self.expected_drop(index)))

    def total_ms(self) -> float | None:
        """The total time now (None while a group has no time)."""
        total = 0.0
        for group in sorted({s.group for s in self.slots}):
            weight = next(s.weight for s in self.slots if s.group == group)
            times = [t for a in {s.alternative for s in self.slots if s.group == group}
                     if (t := self._alternative_ms(group, a)) is not None]
            if not times:
                return None
            total += weight * min(times)
        return total


__all__ = ["Slot", "TaskScheduler", "ALPHA", "BETA", "FIRST_TRIALS"]
