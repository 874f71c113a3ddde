"""Legi-Val core library: schemas, the results store and every metric.

Pure Python on numpy / pandas / pyarrow. Importing this package never imports torch,
streamlit, vllm or an HTTP client; modules that need a heavy dependency import it inside
the function that uses it.
"""

__version__ = "0.1.0"
