"""Payload identification from the base rows of the dynamics: the wrench regression, recursive least squares with
log-det regularisation, batch least squares (the LS[window] baselines) and the online RLS on the estimator grid."""
