# %% [markdown]
# # 1.2 Stable softmax
# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
from autograder import checks

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax(z, axis=-1):
    """Stable softmax."""
    ### BEGIN SOLUTION
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_softmax", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
checks.against_torch("softmax", softmax, "softmax", [checks.case("small", checks.randn(0, 2, 3))])
### BEGIN HIDDEN TESTS
checks.against_torch("softmax", softmax, "softmax", [checks.case("extreme", checks.randn(1, 4, 5, dtype=np.float32) * 1000)])
### END HIDDEN TESTS
