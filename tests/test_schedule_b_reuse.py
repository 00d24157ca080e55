"""schedule.max_b_reuse counts one slice's walk times the slices (issue 15): the same maximum as walking every
batch and split-K slice in turn (the straightforward formulation, kept here), on random grids."""

from __future__ import annotations

import numpy as np

from tiler.model.schedule import clear_caches, max_b_reuse, walks


def _walked(tm, tn, splits, batch, cores, offsets, directions, snakes) -> int:
    """The tiles whose core ran the same B panel just before, over every slice's walk in turn (max over walks)."""
    per = tm * tn
    if batch * splits * per <= cores:
        return 0
    settings = np.array([(o, d, s) for o in offsets for d in directions for s in snakes], dtype=np.int64)
    _, c = walks(tm, tn, settings)
    c = np.tile(c, batch * splits)
    outer = np.repeat(np.arange(batch * splits), per)
    same = (c[:, cores:] == c[:, :-cores]) & (outer[cores:] == outer[:-cores])
    return int(same.sum(axis=1).max())


def test_max_b_reuse_is_the_walk_over_every_slice():
    rng = np.random.default_rng(0)
    clear_caches()
    for _ in range(300):
        tm, tn = (int(x) for x in rng.integers(1, 40, 2))
        splits, batch = int(rng.choice([1, 2, 3, 4, 8])), int(rng.choice([1, 2, 5]))
        cores = int(rng.choice([1, 2, 8, 20, 24, 40]))
        walk = ((1, 2, 3, 4, 8), (0, 1), (0, 1))
        assert max_b_reuse(tm, tn, splits, batch, cores, *walk) == _walked(
            tm, tn, splits, batch, cores, *walk
        )
