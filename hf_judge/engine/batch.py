"""Batch mode: the requests of a run sent through a provider's batch API (OpenAI's ``/v1/files`` and
``/v1/batches``, which other providers and vLLM's ``run-batch`` speak too) instead of one by one.

Another provider's batch API (Anthropic's Message Batches) is reached through a
:class:`~hf_judge.engine.batch_api.BatchApi` (``self.remote``): a written file is created as a batch in one
call (``submitting`` recorded before it), followed, and its results read as OpenAI output lines; the rest
below holds for it as it is.

Only the transport differs from an online run. The split's requests are rendered as the pipeline renders
them (same bodies, same reply-store keys: a line's ``custom_id`` is the key in hex); those the reply store
holds are not sent; the rest are packed into JSONL files within the provider's limits, uploaded and
submitted. Collected replies are validated as online ones and written into the reply store, and the
ordinary pipeline then builds the result from the store (its rows, columns and ``errors`` split).

Resumable: the store's SQLite file also holds the batch book, tables that say which batch each
request is in (``batch_requests``), which requests each batch file was sent (``batch_members``: a batch's
output is accepted for those only) and what became of each batch file (``batch_jobs``). Each step is
recorded before the next one starts: a file is written and its requests assigned to it in one
transaction, then uploaded (its id recorded), then submitted (the batch id recorded). A run that stops
anywhere (Ctrl-C, kill -9, ``no_wait``) is picked up by the next one: a written file is uploaded (or the
upload that a kill hid is found by its file name), an uploaded one is submitted (or the batch a kill hid is
found by its input file), and batches in flight are collected, never submitted again.

A panel of judges: one runner per judge (its server, model and key; :func:`run_all` drives them together),
each judge's batches holding its own requests only. The book is shared: a runner follows the batches of its
server and model (``batch_jobs.model``), and a request's key says which judge it is.

Partial outcomes: a line that failed, one a batch left undone (expired, cancelled, failed as a whole) and
a reply that fails validation are resubmitted in a new batch (or, with ``batch_fallback="online"``, left
to the online pipeline) until each has had ``retries + 1`` tries; then they are error rows of their kind.
A line that failed as online mode never retries (``content_filter``, an HTTP 400: ``batch_book.final``) is an
error row after its one try, sent again neither in a batch nor online.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import (
    AuthenticationError,
    BatchesPending,
    ConfigError,
    ErrorKind,
    ModelNotFoundError,
    RunStopped,
    ServerUnreachableError,
)
from ..judging.metrics import Metric
from ..redact import scrub
from ..store.failures import KEPT_KINDS, failure_key, read_failure, replays
from ..transport.client import JudgeClient
from ..transport.gemini import GeminiApiError, GeminiConnectionError
from .batch_api import BatchApi, BatchApiError, BatchApiUnreachable, RemoteBatch, batch_api
from .batch_book import CHUNK, DONE, ENDPOINT, UNDONE_KIND, BatchBook, BatchReport, Job, server_tag
from .batch_gemini import GeminiBatches
from .batch_lines import Oversized, Packer, Reader, bounded_lines, line, refuse_requests_file

logger = logging.getLogger("hf_judge")


def _api_error(e: Any, base_url: str) -> RunStopped:
    """An error of the batch endpoints as the run's stop, with the next step."""
    status = e.status_code
    said = scrub(getattr(e, "message", "") or str(e))
    if status in (401, 403):
        return AuthenticationError(f"the batch API at {base_url} refused the key (HTTP {status}: {said})")
    if status in (404, 405):
        return ModelNotFoundError(
            f"{base_url} has no batch API (HTTP {status} from /files or /batches: {said}); use a server that offers "
            "one (OpenAI and several gateways do), export the requests for an offline runner "
            "(hf-judge batch export), or score without --batch"
        )
    return RunStopped(
        f"the batch API at {base_url} answered HTTP {status}: {said}. What was submitted is recorded in the reply "
        "cache: run the same command again to carry on."
    )


class BatchRunner:
    """Submits, follows and collects the batches of one run against one server (see the module docstring)."""

    def __init__(
        self,
        client: JudgeClient,
        api_key: str | None,
        store_path: Path,
        metrics: dict[str, Metric],
        *,
        sleep: Callable[[float], None] = time.sleep,
        api: Any = None,
        on_status: Callable[[str], None] | None = None,
        judge: str = "",
    ):
        self.client = client
        self.settings = client.settings
        self.tries = self.settings.retries + 1
        self.judge = judge  # a panel's judge (its column name), named in the errors of its batch API
        # another provider's batch API (Anthropic's Message Batches), or None: OpenAI's, spoken here
        self.remote: BatchApi | None = batch_api(client.provider, client.base_url, api_key, sleep)
        provider = self.remote.provider if self.remote is not None else None
        self.book = BatchBook(store_path, server_tag(client), client.model, provider)
        self.folder = store_path.parent / "batches"
        self.report = BatchReport()
        self.reader = Reader(self.book, client, metrics, self.report)
        self.sleep = sleep
        self._api = api
        self._api_key = api_key
        self.on_status = on_status  # progress: a line on each change of the batches' states
        # A budget (max_cost, max_total_tokens): called before each pass submits, it raises to stop the run
        # while what that pass would submit is still unsent (score._batch_budget).
        self.budget: Callable[[], None] | None = None
        self._said = ""

    @property
    def api(self) -> Any:
        if self._api is None and self.client.provider == "gemini":
            self._api = GeminiBatches.of(self.client, self._api_key)
        if self._api is None:
            from openai import OpenAI

            # The SDK retries its calls (connection errors, 429, 5xx): harmless for reads, and a repeated upload
            # costs nothing; a batch create is never retried blindly (see _create).
            self._api = OpenAI(base_url=self.client.base_url, api_key=self._api_key or "none", max_retries=5)
        return self._api

    def close(self) -> None:
        self.book.close()
        if self._api is not None:
            self._api.close()

    # -- the whole run ----------------------------------------------------------
    def run(self, splits: Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]], no_wait: bool) -> None:
        """Make the reply store hold every request's reply, or a failure the book records, for these splits.

        ``splits``: per split, a function that renders its requests afresh (pipeline.SplitRun.requests).
        """
        run_all([self], [splits], no_wait, self.budget)

    @contextmanager
    def errors(self) -> Iterator[None]:
        """The batch API's errors as the run's stops, naming the server (and a panel's judge)."""
        import openai

        where = f"judge {self.judge!r}: " if self.judge else ""
        try:
            yield
        except (openai.APIStatusError, BatchApiError, GeminiApiError) as e:
            stop = _api_error(e, self.client.base_url)
            stop.args = (where + str(stop.args[0]), *stop.args[1:])
            raise stop from None
        except (openai.APIConnectionError, BatchApiUnreachable, GeminiConnectionError) as e:
            raise ServerUnreachableError(
                f"{where}cannot reach the batch API at {self.client.base_url} ({e}). Batches already submitted are "
                "recorded in the reply cache: run the same command again once the server is back."
            ) from None

    # -- files for offline runners (vllm run-batch) ---------------------------------------
    def export(self, splits: Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]], path: Path) -> int:
        """Write every request the store lacks into one batch JSONL file; returns how many.

        The requests are recorded as those of the job ``export:<file name>``, so that :meth:`read_output`
        can validate their replies and name the lines an output file lacks.
        """
        name = f"export:{path.name}"
        tmp = path.with_name(path.name + ".tmp")
        n = 0
        with open(tmp, "wb") as f:
            with self.book.transaction():
                # an earlier export to the same file name is replaced: its requests are written again
                self.book.conn.execute("UPDATE batch_requests SET job = NULL WHERE job = ?", (name,))
                self.book.conn.execute("DELETE FROM batch_members WHERE job = ?", (name,))
                self.book.conn.execute("DELETE FROM batch_jobs WHERE name = ?", (name,))
                self.book.conn.execute(
                    "INSERT INTO batch_jobs (name, server, base_url, state, requests, created) "
                    "VALUES (?, ?, ?, 'exported', 0, ?)",
                    (name, self.book.server, self.client.base_url, time.time()),
                )
            for requests in splits:
                for chunk in _grouped(requests(), 2048):
                    keys = [k for k, _, _ in chunk]
                    have = self._stored(keys)
                    # an identical request earlier in the file is assigned to this export already
                    have.update(k for k, (job, _, _) in self.book.states(keys).items() if job == name)
                    todo = list({k: (k, m, b) for k, m, b in chunk if k not in have}.values())
                    f.write(b"".join(line(k, b) for k, _, b in todo))
                    self.book.assign([(k, m.name) for k, m, _ in todo], name)
                    n += len(todo)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.book.update(name, requests=n)
        return n

    def read_output(self, path: Path) -> tuple[int, int]:
        """Read a runner's output JSONL into the store: (replies accepted, lines failed or invalid)."""
        self.book.importing = path.name
        cap = self.settings.max_reply_bytes
        with open(path, "rb") as f:
            refuse_requests_file(f, path, cap)
            accepted, failed, p_tok, c_tok = self.reader.read(bounded_lines(f, cap), None, path.name)
        unknown = self.reader.unknown
        if unknown and not accepted + failed:
            # keys are made of the dataset, metrics, model and server: an import with other settings matches nothing
            raise ConfigError(
                f"none of the {unknown:,} lines of {path.name} answers a request exported to the cache "
                f"{self.book.path.parent}: import with the --cache-dir (and the dataset, --metrics, --model and "
                "--base-url) of the `hf-judge batch export` that wrote the requests"
            )
        if unknown:
            logger.warning("skipped %d lines of %s that answer no request exported to this cache", unknown, path.name)
        r = self.report
        r.collected, r.failed, r.prompt_tokens, r.completion_tokens = accepted, failed, p_tok, c_tok
        return accepted, failed

    # -- submission ---------------------------------------------------------------
    def _submit(self, requests: Iterator[list[tuple[bytes, Metric, bytes]]], retry: bool) -> int:
        """Pack the requests that need a (new) try into files and submit each as it is full. Returns how many."""
        s, remote = self.settings, self.remote
        if remote is None:
            packer = Packer(self.folder, s.batch_max_requests, s.batch_max_bytes, self._new_file)
        else:
            most = (min(s.batch_max_requests, remote.max_requests), min(s.batch_max_bytes, remote.max_bytes))
            packer = Packer(self.folder, *most, self._new_file, line=remote.line)
        n = 0
        for chunk in _grouped(requests, 2048):
            keys = [k for k, _, _ in chunk]
            have = self._stored(keys)
            # a request assigned to a file written earlier in this pass is in the book already (committed with it)
            known = self.book.states([k for k in keys if k not in have])
            files = packer.files
            for key, metric, body in chunk:
                if packer.files != files:  # a file was just recorded: its keys are in the book now
                    known, files = self.book.states([k for k in keys if k not in have]), packer.files
                if key in have or key in packer.seen:  # identical requests go once, as the online pipeline shares them
                    continue
                state = known.get(key)
                if state is not None:
                    job, attempts, failed_for_good = state
                    if job is not None and job.startswith("export:"):
                        job = None  # written for an offline runner: batch mode sends it itself
                    if job is not None or attempts >= self.tries or failed_for_good or not retry:
                        continue  # in a batch already, out of tries or refused for good: its error row says why
                    self.report.resubmitted += 1
                    self.client.stats.retries += 1
                packer.add(key, metric.name, body)
                self.client.meter.note_written(body)  # what a line whose reply has no usage counts (budget.py)
                n += 1
        packer.flush()
        self.report.submitted += n
        # a line is a request, as one sent online is: the judge's counters (summary, each judge's figures) say so
        self.client.stats.requests += n
        return n

    def _stored(self, keys: list[bytes]) -> set[bytes]:
        """Of ``keys``, those the store answers: a reply, or (unless ``retry_errors``) a reply that failed
        validation in an earlier run (store/failures.py), which the split replays without a request."""
        found: set[bytes] = set()
        conn = self.book.conn
        failed = {} if self.settings.retry_errors else {failure_key(k): k for k in keys}
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            for table in ("replies", "pending"):
                q = f"SELECT key FROM {table} WHERE key IN ({','.join('?' * len(chunk))})"
                found.update(k for (k,) in conn.execute(q, chunk))
        kept = list(failed)
        for i in range(0, len(kept), CHUNK):
            chunk = kept[i : i + CHUNK]
            for table in ("replies", "pending"):
                q = f"SELECT key, content FROM {table} WHERE key IN ({','.join('?' * len(chunk))})"
                for k, content in conn.execute(q, chunk):
                    record = read_failure(content)
                    if record is not None and replays(record, self.client.max_tokens):
                        found.add(failed[k])
        return found

    def _new_file(self, path: Path, keys: list[tuple[bytes, str]]) -> None:
        name = path.stem
        self.book.add_job(name, self.client.base_url, keys)
        logger.info("batch: wrote %s (%d requests)", path.name, len(keys))
        self._advance(Job(name, "written", len(keys), created=time.time()))

    def _resume(self) -> None:
        """Carry every file an earlier run left half-way (written, uploaded) to a submitted batch."""
        for job in self.book.jobs(["written", "uploaded", "submitting"]):
            if job.state in ("written", "submitting") and not (self.folder / f"{job.name}.jsonl").exists():
                # never uploaded, and its file is gone (a cleaned cache): its requests go in the next pass
                self.book.release(job)
                continue
            self._advance(job)

    def _advance(self, job: Job) -> None:
        if self.remote is not None:
            self._advance_remote(job, self.remote)
            return
        if job.state == "written":
            file_id = self._find_upload(job) or self._upload(job)
            self.book.update(job.name, file_id=file_id, state="uploaded")
            job.file_id, job.state = file_id, "uploaded"
        if job.state == "uploaded":
            batch = self._find_batch(job) or self._create(job)
            self.book.update(job.name, batch_id=batch.id, state=batch.status)
            self.report.batches += 1
            self.report.batch_ids.append(batch.id)
            logger.info("batch: submitted %s as %s (%d requests)", job.name, batch.id, job.requests)
            path = self.folder / f"{job.name}.jsonl"
            try:
                path.unlink()
            except OSError:
                pass

    def _create(self, job: Job) -> Any:
        """Create the batch of an uploaded file. Not retried blindly: a create whose reply was lost may have made
        a batch, so before each new try the provider's list is searched for it (a second one would be paid twice)."""
        import openai

        api = self.api.with_options(max_retries=0)
        for attempt in range(6):
            try:
                return api.batches.create(
                    input_file_id=job.file_id,
                    endpoint=ENDPOINT,
                    completion_window="24h",
                    metadata={"hf_judge": job.name},
                )
            except (
                openai.APIConnectionError,
                openai.InternalServerError,
                openai.RateLimitError,
                GeminiConnectionError,
                GeminiApiError,
            ) as e:
                if attempt == 5 or (isinstance(e, GeminiApiError) and e.status_code not in (429, 500, 502, 503, 504)):
                    raise
            self.sleep(min(30.0, self.settings.backoff_base * 2**attempt))
            found = self._find_batch(job)
            if found is not None:
                return found
        raise AssertionError("unreachable")

    def _upload(self, job: Job) -> str:
        path = self.folder / f"{job.name}.jsonl"
        with open(path, "rb") as f:
            return self.api.files.create(file=(path.name, f), purpose="batch").id

    def _find_upload(self, job: Job) -> str | None:
        """The upload a kill hid: a file of the provider's named after the job (recorded only after it returned)."""
        for f in self.api.files.list(purpose="batch"):
            if f.filename == f"{job.name}.jsonl":
                return f.id
        return None

    def _find_batch(self, job: Job) -> Any:
        """The batch a kill hid: one the provider made from this file (recorded only after create returned)."""
        for b in self.api.batches.list(limit=100):
            if b.input_file_id == job.file_id:
                return b
        return None

    def _advance_remote(self, job: Job, remote: BatchApi) -> None:
        """Submit a written file through another provider's batch API. ``submitting`` is recorded before the
        create: a run killed before its batch id was recorded finds that batch (:meth:`BatchApi.find`) rather
        than paying for a second one."""
        batch = None
        if job.state == "submitting":
            batch = remote.find(job.created, job.requests, self._known_batches())
        if batch is None:
            self.book.update(job.name, state="submitting")
            try:
                batch = self._create_remote(job, remote)
            except BatchApiError as e:
                if e.status_code not in (400, 413, 422):
                    raise
                self._refused(job, e)
                return
        self._submitted(job, batch.id, batch.status)

    def _refused(self, job: Job, e: BatchApiError) -> None:
        """A batch the provider refused as a whole (a request it cannot take): its requests have had a try, failed
        with the provider's words, as those of an OpenAI batch that fails validation."""
        message = scrub(f"the provider refused the whole batch (HTTP {e.status_code}): {e.message}")
        self.book.update(job.name, message=message)
        undone = self.book.close_job(job, ErrorKind.BATCH_FAILED, message)
        self.report.failed += undone
        (self.folder / f"{job.name}.jsonl").unlink(missing_ok=True)
        logger.warning("batch: %s of %d requests was refused: %s", job.name, undone, message)

    def _known_batches(self) -> set[str]:
        return {j.batch_id for j in self.book.jobs(every_server=True) if j.batch_id}

    def _create_remote(self, job: Job, remote: BatchApi) -> RemoteBatch:
        """As :meth:`_create`: a failed create is tried again only once the provider's list shows no batch of it."""
        path = self.folder / f"{job.name}.jsonl"
        for attempt in range(6):
            try:
                return remote.create(path, job.requests)
            except (BatchApiError, BatchApiUnreachable) as e:
                if attempt == 5 or (isinstance(e, BatchApiError) and e.status_code != 429 and e.status_code < 500):
                    raise
            self.sleep(min(30.0, self.settings.backoff_base * 2**attempt))
            found = remote.find(job.created, job.requests, self._known_batches())
            if found is not None:
                return found
        raise AssertionError("unreachable")

    def _submitted(self, job: Job, batch_id: str, status: str) -> None:
        self.book.update(job.name, batch_id=batch_id, state=status)
        self.report.batches += 1
        self.report.batch_ids.append(batch_id)
        logger.info("batch: submitted %s as %s (%d requests)", job.name, batch_id, job.requests)
        (self.folder / f"{job.name}.jsonl").unlink(missing_ok=True)

    # -- collection ---------------------------------------------------------------
    def _poll(self) -> list[Job]:
        """One look at the batches in flight, collecting each that has ended; returns those still running."""
        for job in [j for j in self.book.jobs() if j.batch_id and j.state != "collected"]:
            if self.remote is not None:
                self._poll_remote(job, self.remote)
                continue
            batch = self.api.batches.retrieve(job.batch_id)
            counts = batch.request_counts
            if batch.status != job.state or (counts and counts.completed != job.done):
                self.book.update(
                    job.name,
                    state=batch.status,
                    done=counts.completed if counts else 0,
                    failed=counts.failed if counts else 0,
                )
            if batch.status in DONE:
                self._collect(job, batch)
        return [j for j in self.book.jobs() if j.batch_id and j.state != "collected"]

    def _poll_remote(self, job: Job, remote: BatchApi) -> None:
        assert job.batch_id is not None
        batch = remote.retrieve(job.batch_id)
        if batch.status != job.state or batch.done != job.done:
            self.book.update(job.name, state=batch.status, done=batch.done, failed=batch.failed)
        if batch.status not in DONE:
            return
        lines = remote.lines(batch, self.folder, self.settings.max_reply_bytes)
        accepted, failed, p_tok, c_tok = self.reader.read(lines, job.name, f"batch {batch.id}")
        message = _batch_message(batch)
        undone = self.book.close_job(job, UNDONE_KIND.get(batch.status, ErrorKind.BATCH_FAILED), message)
        self.book.update(job.name, prompt_tokens=p_tok, completion_tokens=c_tok, message=message, done=accepted)
        self._collected(batch, accepted, failed, undone, (p_tok, c_tok), message)

    def _collected(self, batch: Any, accepted: int, failed: int, undone: int, tokens: tuple, message: str) -> None:
        """Count a collected batch in the run's report (and say how it ended, where not every line came back)."""
        r = self.report
        if batch.id not in r.batch_ids:  # submitted by an earlier run (--no-wait, Ctrl-C): this run collected it
            r.batches += 1
            r.batch_ids.append(batch.id)
        r.collected += accepted
        r.failed += failed + undone
        r.prompt_tokens += tokens[0]
        r.completion_tokens += tokens[1]
        if batch.status != "completed" or failed or undone:
            logger.warning(
                "batch %s ended %s: %d replies accepted, %d failed or invalid, %d not run (%s)",
                batch.id,
                batch.status,
                accepted,
                failed,
                undone,
                message,
            )

    def _status(self, live: list[Job]) -> None:
        by_state: dict[str, int] = {}
        for j in live:
            by_state[j.state] = by_state.get(j.state, 0) + 1
        states = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items()))
        done, total = sum(j.done for j in live), sum(j.requests for j in live)
        line = f"batches in flight: {states}; {done:,} of {total:,} requests done"
        logger.info("batch: %s", line)
        if line != self._said and self.on_status is not None:
            self._said = line
            self.on_status(line)

    def _collect(self, job: Job, batch: Any) -> None:
        files = [file_id for file_id in (batch.output_file_id, batch.error_file_id) if file_id]
        # one read of both files: a request is settled once, whichever file its lines are in
        lines = (raw for file_id in files for raw in self._lines(file_id))
        accepted, failed, p_tok, c_tok = self.reader.read(lines, job.name, f"batch {batch.id}")
        if self.reader.unknown:
            logger.warning(
                "skipped %d line(s) of batch %s that answer requests it was not sent (their own batches answer them)",
                self.reader.unknown,
                batch.id,
            )
        message = _batch_message(batch)
        undone = self.book.close_job(job, UNDONE_KIND.get(batch.status, ErrorKind.BATCH_FAILED), message)
        self.book.update(job.name, prompt_tokens=p_tok, completion_tokens=c_tok, message=message, done=accepted)
        self._delete(batch.input_file_id, batch.output_file_id, batch.error_file_id)
        self._collected(batch, accepted, failed, undone, (p_tok, c_tok), message)

    def _delete(self, *file_ids: str | None) -> None:
        """Delete a collected batch's files at the provider (its storage is limited); best effort, they expire too."""
        import openai

        for file_id in file_ids:
            if file_id:
                try:
                    self.api.files.delete(file_id)
                except (openai.OpenAIError, GeminiApiError, GeminiConnectionError) as e:
                    logger.debug("could not delete the batch file %s: %s", file_id, e)

    def _lines(self, file_id: str) -> Iterator[bytes | Oversized]:
        """The file's lines, streamed through a local copy: a 200 MB output is never held in memory, nor is a
        line over ``max_reply_bytes``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        safe = file_id.replace("/", "_").replace(":", "_")  # Gemini's ids are paths (files/abc)
        path = self.folder / f"download-{safe}-{uuid.uuid4().hex[:8]}.jsonl"
        try:
            with self.api.files.with_streaming_response.content(file_id) as r:
                r.stream_to_file(path)
            with open(path, "rb") as f:
                yield from bounded_lines(f, self.settings.max_reply_bytes)
        finally:
            try:
                path.unlink()
            except OSError:
                pass


Splits = Sequence[Callable[[], Iterator[list[tuple[bytes, Metric, bytes]]]]]


def run_all(
    runners: Sequence[BatchRunner], splits: Sequence[Splits], no_wait: bool, budget: Callable[[], None] | None
) -> None:
    """Drive the batches of one run: one runner per judge (one for a run without a panel), ``splits[i]`` the
    requests of ``runners[i]``'s judge. The first pass collects the batches that have ended and submits what
    is in none, for every judge, before anything is waited for: a judge whose batches an earlier run left in
    flight does not hold up another's (a panel takes as long as its slowest judge's batches). Later passes wait
    for every batch, then resubmit the failed lines.

    ``budget`` (max_cost, max_total_tokens): called before each pass submits, it raises to stop the run while
    what that pass would submit is still unsent (score._batch_budget), for every judge at once.
    """
    resubmit = runners[0].settings.batch_fallback == "batch"
    tries = runners[0].tries
    if runners[0].settings.retry_errors:  # the replies that failed validation for good are asked again, once
        runners[0].book.forget_failures(KEPT_KINDS)
    first = True
    while True:
        if first and budget is not None:
            budget()  # before anything is uploaded: the files an earlier run left half-way are counted
        for r in runners:
            with r.errors():
                r._resume()
        if first:
            live = _poll_all(runners)
        else:
            _wait_all(runners, no_wait)
            if not (resubmit and runners[0].book.retryable(tries)):
                return
            if budget is not None:
                budget()  # the failed lines' next tries, now that the run has paid for the last pass
        n = 0
        for r, todo in zip(runners, splits, strict=True):
            with r.errors():
                n += sum(r._submit(requests(), retry=resubmit or first) for requests in todo)
        if not first and n == 0:
            return
        if no_wait and (n or (first and live)):
            _pending(runners)
        first = False


def _poll_all(runners: Sequence[BatchRunner]) -> list[Job]:
    """One look at every judge's batches in flight (those that ended are collected); returns those running."""
    left: dict[str, Job] = {}
    for r in runners:
        with r.errors():
            left.update((j.name, j) for j in r._poll())  # a batch of an older cache is every judge's on its server
    return list(left.values())


def _wait_all(runners: Sequence[BatchRunner], no_wait: bool) -> None:
    """Follow every judge's batches in flight, collecting each as it ends; with ``no_wait``, look once."""
    while True:
        left = _poll_all(runners)
        if not left:
            return
        if no_wait:
            _pending(runners)
        runners[0]._status(left)
        runners[0].sleep(runners[0].settings.batch_poll_s)


def _pending(runners: Sequence[BatchRunner]) -> None:
    jobs = [j for r in runners for j in r.book.jobs() if j.state not in ("collected", "exported")]
    jobs = list({j.name: j for j in jobs}.values())  # a batch of an older cache is every judge's on its server
    ids = ", ".join(j.batch_id or j.name for j in jobs[:5]) + (", ..." if len(jobs) > 5 else "")
    raise BatchesPending(
        f"{len(jobs)} batch(es) of {sum(j.requests for j in jobs):,} requests are running at the provider "
        f"({ids}); their ids are kept in the reply cache. Run the same command again (without --no-wait to "
        "wait for them) to collect them: nothing is submitted twice. `hf-judge batch status` shows them."
    )


def _batch_message(batch: Any) -> str:
    """The provider's own words for a batch that did not complete (its errors), else its state."""
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    words = "; ".join(
        f"{e.code}: {e.message}" + (f" (line {e.line})" if getattr(e, "line", None) else "") for e in errors[:5]
    )
    if batch.status == "completed":
        return "the batch completed without this request's line"
    base = {
        "expired": "the batch expired (its completion window ended) before this request ran",
        "cancelled": "the batch was cancelled before this request ran",
        "failed": "the whole batch failed",
    }.get(batch.status, f"the batch ended {batch.status}")
    return scrub(f"{base}: {words}" if words else base)


def _grouped(requests: Iterator[list[tuple[bytes, Metric, bytes]]], size: int) -> Iterator[list]:
    out: list = []
    for part in requests:
        out += part
        if len(out) >= size:
            yield out
            out = []
    if out:
        yield out
