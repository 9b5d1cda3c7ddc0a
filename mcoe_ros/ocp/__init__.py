"""Generic multiple-shooting optimal estimation (numpy/scipy only).

Interval model/data contract (:mod:`.interval`), state manifolds (:mod:`.state`), the estimation problem with its
arrival prior and parametrization (:mod:`.problem`), the parametrized Riccati recursion and arrival solve
(:mod:`.riccati`), the solver with rollouts, line search, marginalisation and covariances (:mod:`.solver`), and one
finite-difference checker for every derivative test (:mod:`.numdiff`). Imports nothing above it.
"""
