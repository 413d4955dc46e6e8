"""What the server roles (controller and broker) share: one home for each helper they both need.

It imports `proto` only, so `quorum` and `broker` can both depend on it without depending on each
other (see DEVELOPERS.md, "Packages and the direction of imports").
"""
