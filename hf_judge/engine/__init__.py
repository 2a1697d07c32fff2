"""Running a job: preparing it, the row core (``core.RowCore``) and the engines that drive it (one
process, a stream, worker processes, provider batches, Ray), and cost estimates."""
