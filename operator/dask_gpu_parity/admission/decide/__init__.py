"""The operator's decisions: pure functions and plain state, no I/O.

An AdmissionReview in, an answer out (``reviews``, ``decisions``, ``configurations``); a stored
scheduler Deployment against parity (``drift``); where a cluster's pods run, by driver class
(``placement``); the Events a failed GPU check earns (``podevents``); node events into the core
inventory's shapes (``nodeindex``). :mod:`dask_gpu_parity.admission.runtime` feeds them.
"""
