"""gpuviewer: a desktop trace explorer for GPU and distributed-training performance."""

__version__ = "0.1.0"
