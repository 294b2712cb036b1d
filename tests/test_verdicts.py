"""Trusted verdicts: the wire format, and test cells run outside a real kernel (autograder.outside.verdicts)."""
import json

import jupyter_client
import numpy as np
import pytest

from autograder.outside import verdicts
from autograder.inside.wire import Codec, WireError


def pair():
    """Two codecs talking to each other as the grader and the kernel do (through JSON)."""
    objects = {}

    def make_handle(obj):
        objects[id(obj)] = obj
        return id(obj)

    return Codec("t", make_handle, objects.__getitem__), Codec("k", make_handle, objects.__getitem__)


def cross(sender, receiver, payload):
    return receiver.decode_message(json.loads(json.dumps(sender.encode_message(payload))))


def test_arrays_keep_dtype_layout_and_aliasing():
    grader, kernel = pair()
    x = np.arange(24.0).reshape(4, 6)
    sent = [x, x.T, x[::2, 1::2], x[::-1], np.asarray(2.5, dtype=np.float32), np.zeros((0, 3)), np.float32(1.5),
            np.array([True, False]), np.arange(3)[None, :]]
    got = cross(grader, kernel, sent)
    for a, b in zip(sent, got):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        if isinstance(a, np.ndarray):
            assert a.strides == b.strides and a.flags.c_contiguous == b.flags.c_contiguous
    assert all(np.shares_memory(got[0], g) for g in got[1:4])


def test_a_write_on_either_side_reaches_the_other():
    grader, kernel = pair()
    x = np.zeros(5)
    (kx,) = cross(grader, kernel, [x])
    kx[1:3] += 7.0  # the student's code writes into its input
    view = cross(kernel, grader, kx[1:])  # the result views the input, as the kernel made it
    assert x.tolist() == [0, 7, 7, 0, 0] and np.shares_memory(view, x)
    x[0] = -1.0  # the test writes into an array the kernel holds
    cross(grader, kernel, None)
    assert kx[0] == -1.0


def test_python_values_round_trip():
    grader, kernel = pair()
    value = {"a": (1, 2.5, None, True, "s"), 3: [slice(1, None, 2), Ellipsis], "big": 2 ** 70,
             "nan": float("nan"), "dtype": np.float32, "dt": np.dtype("int64"), "f": np.tanh}
    got = cross(grader, kernel, value)
    assert got["a"] == value["a"] and got[3] == value[3] and got["big"] == 2 ** 70 and np.isnan(got["nan"])
    assert got["dtype"] is np.float32 and got["dt"] == np.dtype("int64") and got["f"] is np.tanh


@pytest.mark.parametrize("message", [
    {"owners": {"k1": {"dtype": "object", "shape": [1], "data": ""}}, "body": None},  # no object arrays
    {"owners": {"k1": {"dtype": "float64", "shape": [2], "data": "AAAA"}}, "body": None},  # wrong size
    {"owners": {"k1": {"dtype": "float64", "shape": [1], "data": "AAAAAAAAAAA="}},
     "body": {"array": "k1", "dtype": "float64", "shape": [3], "strides": [8], "offset": 0}},  # outside
    {"owners": {"k1": {"dtype": "float64", "shape": [1], "data": "AAAAAAAAAAA="}},
     "body": {"array": "k1", "dtype": "float64", "shape": [1 << 30], "strides": [0], "offset": 0}},  # huge
    {"owners": {}, "body": {"pickle": "gASVAAAA"}},
    {"owners": {}, "body": {"array": "nowhere", "dtype": "float64", "shape": [], "strides": [], "offset": 0}},
])
def test_malformed_messages_are_refused(message):
    _, kernel = pair()
    with pytest.raises(WireError):
        kernel.decode_message(message)


@pytest.fixture(scope="module")
def kernel():
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kernel, student_code, test_code):
    """Run ``student_code`` in the kernel, then ``test_code`` outside it; the test cell's outputs."""
    km, kc = kernel
    reply = kc.execute_interactive(student_code, timeout=60, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok"
    return verdicts.run_test_cell(verdicts.Remote(kc, 60), test_code, {})


TEST = """
from autograder.inside import checks
checks.against_torch("relu", relu, "relu", [checks.case("strided", checks.strided(checks.randn(1, 4, 6)))])
x = np.array([-1.0, 2.0])
checks.run_student("relu", relu, x)
assert x.tolist() == [-1.0, 2.0], "[relu] your function changed its input array in place"
"""


def test_a_right_answer_passes_and_prints_nothing(kernel):
    assert run(kernel, "import numpy as np\ndef relu(x):\n    print('noise')\n    return np.maximum(x, 0)", TEST) == []


@pytest.mark.parametrize("code, message", [
    ("def relu(x):\n    return np.abs(x)", "[relu] case 'strided'"),
    ("def relu(x):\n    x[x < 0] = 0\n    return x", "changed its input array in place"),
    ("def relu(x):\n    raise NotImplementedError()", "[relu] `relu` is not written yet"),
    ("def relu(x):\n    import warnings; warnings.warn('careful')\n    return np.maximum(x, 0)", "emitted UserWarning"),
])
def test_a_wrong_answer_fails_with_the_checks_message(kernel, code, message):
    (out,) = run(kernel, "import numpy as np\n" + code, TEST)
    assert out["output_type"] == "error" and message in out["evalue"], out


def test_a_kernel_that_forges_the_recording_still_fails(kernel):
    """The notebook replaces the recording's serve loop with one that answers every call with the
    argument it got (and says it never raised, warned or called torch): whatever it answers, the
    comparison happens here, against inputs chosen here."""
    forge = """
import builtins, json, sys
import numpy as np
def relu(x):
    return x
rec = sys.modules['autograder.inside.recording']
def serve():
    from autograder.inside.wire import Codec
    codec = Codec('k', lambda o: 1, lambda h: None)
    reply, seq = {'ready': True}, 0
    while True:
        request = json.loads(builtins.input(json.dumps({'seq': seq, 'message': codec.encode_message(reply)})))
        if request.get('op') == 'ping':
            continue
        if request.get('op') == 'end':
            return
        seq = request['seq']
        call = codec.decode_message(request['message'])
        if request.get('builtin') == 'names':
            reply = {'value': {'relu': relu}}
        else:
            reply = {'value': call['args'][-1] if call['args'] else None, 'warnings': [], 'delegated': []}
rec.serve = serve
"""
    run(kernel, "import autograder.inside.recording", "")
    (out,) = run(kernel, forge, TEST)
    assert out["output_type"] == "error" and "[relu] case 'strided'" in out["evalue"], out


def test_hidden_draws_are_the_students_own(kernel):
    """The worker draws a student's hidden cases with that student's seed (as the kernel would)."""
    from autograder.inside import checks

    printed = []
    for seed in (11, 12):
        with checks.student_seed_of(seed):
            (out,) = run(kernel, "x = 1", "print(checks.student_seed('probe'))")
        printed.append(int(out["text"]))
    assert printed == [checks.mix_seed(11, "probe"), checks.mix_seed(12, "probe")]
