"""The bounds planning searches to, shared by the plans (memory.py, decode.py) and their tables
(render.py): the longest context a memory plan searches, and the largest decode batch searched for
where the step turns compute-bound.
"""

MAX_CONTEXT = 2**24  # 16,777,216 tokens: published models reach 10M; longer is a typo
SEARCH_MAX_BATCH = 65536  # compute-bound batches are searched up to here; the largest decode batch planned
