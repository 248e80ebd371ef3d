"""What a model will cost on Trainium before renting: step time, throughput, MFU and dollars, training and serving.

A first-principles ESTIMATE (`docs/cost-model.md`): per step, compute at the dtype's published peak times an
achievable fraction, HBM traffic at its bandwidth times an achievable fraction, and the collectives of the
parallel layout over the links they cross, each paying a fixed latency; the step takes the critical path
under a stated overlap assumption. The three fractions and the latency were fitted once on two rows AWS
publishes and frozen (`neuronkit/data/cost_model.toml`); the band every estimate carries is the spread of
the predicted/published ratio on the other published rows (`bench/bench_cost.py`).
"""
