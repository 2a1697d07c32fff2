"""A stand-in for vLLM, for the tests of what hf-judge does around the vLLM judges it starts (their turns, their
stops), without vLLM's minutes of start: ``python -m vllm.entrypoints.openai.api_server --model M
--served-model-name NAME --port P ...`` runs the loopback judge server (tests/judge_server.py) serving NAME on P.
Put this folder on PYTHONPATH and name the interpreter in $HF_JUDGE_VLLM_PYTHON. Each start and stop is a line
of the file $FAKE_VLLM_LOG (``start NAME``, ``stop NAME REQUESTS``), so a test sees which engines were up when;
``config.json`` beside that file, where there is one, is the judge server's config (faults).
"""
