"""Paper 003: LR-Geo, locally relevant geo-obfuscation.

``user`` and ``server`` are the two sides of the protocol, ``messages`` everything that crosses
between them, ``table`` the server's cost reference table, ``protocol`` one round end to end,
and ``measures`` the paper's measures of a round. The public location model (a grid over a road
network) is :mod:`certdp.datasets.city`.
"""
