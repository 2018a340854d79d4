"""Experiments that put the engines side by side as the papers do: ``compare`` (paper 002's
table), ``lrgeo`` (paper 003's baselines), ``views`` (paper 004's RMSE comparison) and
``instances`` (the named benchmark instances)."""
