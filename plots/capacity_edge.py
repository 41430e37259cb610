#!/usr/bin/python3
"""Figure `capacity_edge`: what fits a memory-poor device, drawn as `capacity` (plots/capacity.py).

    plots/capacity_edge.py [--out DIR] results/capacity_edge.h5
"""

import capacity

if __name__ == "__main__":
    capacity.main("capacity_edge", "What fits a memory-poor device: the largest batch at 224x224 within 2 to 8 GiB, SGD, BN train "
                                   "(predicted footprints)")
