"""`reverb`: DeepMind's Reverb (the replay server behind Acme) as a backend of the replay suite, laid out as Acme
lays it out: a server in the cell process with one table per workload, actor processes adding over gRPC.

It runs in its own environment (adapters/envs/reverb.txt: TensorFlow 2.15, numpy 1.26), so nothing here imports
reverb or TensorFlow at module level. How it is built: docs/strategies/replay.md, "How the Reverb adapter is built".
"""
import os
import shutil
import tempfile
import time

import numpy as np

from adapters._kit.procs import Transient
from rlbench.api import Adapter, Option, register
from rlbench.families.replay.api import PRIORITY_ALPHA, ReplaySession, replay_spec, scratch_dir

TABLE = "replay"
IN_FLIGHT_BYTES = 128 << 20   # the dataset's samples in flight per worker: 2 batches (Acme's), at most this much
SPAWN = "spawn"     # actor processes: gRPC's threads do not survive a fork of a process using them


def _import_reverb():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # TensorFlow's banner goes to stderr; keep it short
    import reverb
    return reverb


def _in_flight(spec, given: int) -> int:
    return given or (2 if spec.seq_len > 1 else 5)       # Acme: SequenceAdder 2, NStepTransitionAdder 5


class ReverbWriter(Transient):
    """What an actor process holds: the server address; the client and its TrajectoryWriter are made in
    the actor on first use (count(), before the schedule starts) and never pickled."""
    transient = ("_w", "_client")

    def __init__(self, address: str, max_in_flight: int, first_seq: dict):
        self.address, self.max_in_flight, self.first_seq = address, max_in_flight, first_seq
        self._w = self._client = None

    def connect(self):
        if self._w is None:
            reverb = _import_reverb()
            self._client = reverb.Client(self.address)
            self._w = self._client.trajectory_writer(num_keep_alive_refs=1)
        return self._w

    def count(self, actor: int) -> int:
        """Where this actor's id sequence starts (the fill wrote actor 0's first ids); connects."""
        self.connect()
        return self.first_seq.get(actor, 0)

    def add(self, item) -> None:
        w = self._w or self.connect()
        w.append({"obs": item})
        w.create_item(TABLE, 1.0, {"obs": w.history["obs"][-1]})
        w.flush(self.max_in_flight)

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
        self._w = self._client = None


class ReverbStore:
    bound = "memcpy_1core"

    def __init__(self, spec, rate_limiter: str, sampler: str, max_in_flight: int):
        reverb = _import_reverb()
        self.reverb, self.spec, self.sampler = reverb, spec, sampler
        self.server = self.client = self.dataset = self.iterator = self.filler = self.checkpoints = None
        self.max_in_flight = _in_flight(spec, max_in_flight)
        self.filled = self._settled = 0
        from multiprocessing import resource_tracker
        self._tracker = resource_tracker._resource_tracker   # spawning actors starts it; see close()
        self._tracker_was_running = self._tracker._fd is not None
        try:
            # Reverb's default checkpointer makes a temporary folder in /tmp and leaves it there; this one is
            # in the run's scratch folder and goes with close() (nothing is ever checkpointed)
            self.checkpoints = tempfile.mkdtemp(prefix="reverb-checkpoints-", dir=scratch_dir())
            self.server = reverb.Server([self._table(rate_limiter)], port=None,
                                        checkpointer=reverb.checkpointers.DefaultCheckpointer(self.checkpoints))
            self.address = f"localhost:{self.server.port}"
            self.client = reverb.Client(self.address)
            self.filler = ReverbWriter(self.address, self.max_in_flight, {})
            self._batch = np.ones((spec.batch_size, spec.item_bytes), dtype=np.uint8)  # faulted in once
        except BaseException:
            self.close()
            raise

    def _table(self, rate_limiter: str):
        reverb, spec = self.reverb, self.spec
        if rate_limiter == "sample-to-insert":
            spi = spec.sample_per_s / spec.add_per_s
            # The fill inserts `capacity` items before any sample, so sampling may start only at full size;
            # the error buffer (in samples) lets the two sides drift two batches apart (reverb's minimum is
            # 2 * max(1, spi)).
            limiter = reverb.rate_limiters.SampleToInsertRatio(
                samples_per_insert=spi, min_size_to_sample=spec.capacity,
                error_buffer=max(2.0 * spec.batch_size, 2.0 * max(1.0, spi)))
        else:
            limiter = reverb.rate_limiters.MinSize(1)
        selector = (reverb.selectors.Prioritized(PRIORITY_ALPHA) if spec.prioritized
                    else reverb.selectors.Uniform())
        # a bounded-reuse workload: Reverb removes an item on its max_times_sampled-th sample (0: never)
        return reverb.Table(name=TABLE, sampler=selector, remover=reverb.selectors.Fifo(),
                            max_size=spec.capacity, rate_limiter=limiter,
                            max_times_sampled=spec.max_reuse if spec.bounded else 0)

    # -- learner side ---------------------------------------------------------------------------------
    def add(self, item) -> None:
        self.filler.add(item)
        self.filled += 1

    def add_many(self, items) -> None:
        for item in items:
            self.filler.add(item)
        self.filled += len(items)

    def writer(self):
        """For the actor processes: the fill wrote actor 0's ids 0..filled-1, so actor 0 goes on from there."""
        self._settle()
        return ReverbWriter(self.address, self.max_in_flight, {0: self.filled})

    def inserted(self) -> int:
        """Items the table has taken in (its rate limiter's completed inserts): what it holds plus what it has
        removed, FIFO or on an item's max_times_sampled-th sample."""
        info = self.client.server_info()[TABLE]
        try:
            return int(info.rate_limiter_info.insert_stats.completed)
        except AttributeError:
            return int(info.current_size)

    def _settle(self) -> None:
        """Everything the learner wrote is in the table (so the table is full) before anything is timed; once
        per batch of the learner's writes (the fill), not on every sample."""
        if self._settled == self.filled:
            return
        if self.filler._w is not None:
            self.filler._w.flush()
        deadline = time.monotonic() + 60
        while self.filled and self.inserted() < self.filled:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Reverb table took in {self.inserted()} of {self.filled} items written")
            time.sleep(0.01)
        self._settled = self.filled

    def _make_dataset(self):
        import tensorflow as tf
        spec = self.spec
        ds = self.reverb.TrajectoryDataset(
            server_address=self.address, table=TABLE, dtypes={"obs": tf.uint8},
            shapes={"obs": tf.TensorShape([spec.item_bytes])},
            max_in_flight_samples_per_worker=max(1, min(2 * spec.batch_size, IN_FLIGHT_BYTES // spec.item_bytes)))
        self.dataset = ds.batch(spec.batch_size, drop_remainder=True)
        self.iterator = self.dataset.as_numpy_iterator()

    def sample(self, n: int):
        if self.sampler == "dataset" and n == self.spec.batch_size:
            if self.iterator is None:
                self._settle()
                self._make_dataset()
            s = next(self.iterator)
            return s.data["obs"], s.info.key
        self._settle()
        batch = self._batch if n == len(self._batch) else np.empty((n, self.spec.item_bytes), np.uint8)
        keys = np.empty(n, dtype=np.uint64)
        for i, s in enumerate(self.client.sample(TABLE, num_samples=n, emit_timesteps=False)):
            batch[i] = s.data[0]
            keys[i] = s.info.key
        return batch, keys

    def update_priorities(self, keys, priorities) -> None:
        self.client.mutate_priorities(TABLE, updates=dict(zip(np.asarray(keys, dtype=np.uint64).tolist(),
                                                              np.asarray(priorities, dtype=float).tolist())))

    def close(self) -> None:
        self.iterator = self.dataset = None
        if self.filler is not None:
            self.filler.close()
            self.filler = None
        self.client = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.checkpoints is not None:
            shutil.rmtree(self.checkpoints, ignore_errors=True)
            self.checkpoints = None
        if not self._tracker_was_running:
            # Spawning the actor processes started multiprocessing's resource tracker, a helper process that
            # would outlive the session; the actors are gone by now (the session closes them first)
            try:
                self._tracker._stop()
            except Exception:  # private API: leaving it behind beats failing close()
                pass


@register
class ReverbAdapter(Adapter):
    name = "reverb"
    kind = "replay"
    environment = "reverb"          # adapters/envs/reverb.txt: TensorFlow 2.15, numpy 1.26
    description = "DeepMind Reverb: a server with one table, TrajectoryWriters in actor processes, a sampling learner"
    requires = ("reverb",)
    options = (
        Option("rate_limiter", str, "min-size",
               "min-size (never blocks once full) or sample-to-insert (the workload's samples per insert)",
               ("min-size", "sample-to-insert")),
        Option("sampler", str, "dataset",
               "dataset (reverb.TrajectoryDataset batched by tf.data, Acme's learner input) or client "
               "(client.sample per batch, copied into the learner's batch)",
               ("client", "dataset")),
        Option("max_in_flight", int, 0, "items a writer may have in flight before flush blocks "
               "(0 = Acme's: 5 transitions, 2 sequences)"),
    )

    def supports(self, workload, options):
        mode = workload.env_kwargs.get("mode", "max-sample")
        if options["rate_limiter"] == "sample-to-insert" and mode in ("max-sample", "max-add"):
            return (f"rate_limiter=sample-to-insert in mode {mode}: one side alone would block as soon as "
                    "its error buffer is spent (use target or max-both)")
        return None

    def open(self, workload, options):
        spec = replay_spec(workload)
        store = ReverbStore(spec, options["rate_limiter"], options["sampler"], options["max_in_flight"])
        try:
            session = ReplaySession(store, spec, SPAWN)
        except BaseException:
            store.close()
            raise
        return session
