"""Prometheus metrics of one server, in their own registry (so several apps in one process never collide)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("bertforge_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.latency = Histogram("bertforge_request_duration_seconds", "Request latency by endpoint", ["endpoint"],
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
                                 registry=r)
        self.batch_size = Histogram("bertforge_batch_size", "Inputs per model call", ["kind"],
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=r)
        self.batch_tokens = Histogram("bertforge_batch_tokens", "Padded tokens per model call", ["kind"],
                                      buckets=(64, 256, 1024, 4096, 16384, 65536), registry=r)
        self.queue_depth = Gauge("bertforge_queue_depth", "Requests waiting for or inside the model",
                                 registry=r)
        self.queued_inputs = Gauge("bertforge_queued_inputs", "Inputs waiting for a batch", registry=r)
        self.tokens = Counter("bertforge_tokens", "Input tokens processed by endpoint", ["endpoint"], registry=r)
