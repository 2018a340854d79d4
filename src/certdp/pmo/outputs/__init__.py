"""The decomposition over outputs: ``master`` (dense column LP), ``pricing`` (one LP per output)
and ``solve`` (the loop, with its bounds)."""
