"""Trusted verdicts: the wire format, and test cells run outside a real kernel (autograder.outside.verdicts)."""
import json
import socket
import time
import types

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kernels
from autograder.outside import verdicts
from autograder.inside.wire import Channel, Codec, WireError


def pair():
    """Two codecs talking to each other as the grader and the kernel do (through JSON)."""
    objects = {}

    def make_ref(obj):
        objects[id(obj)] = obj
        return "handle", id(obj)

    def resolve_ref(kind, number, cls=None):
        return objects[number]

    return Codec("t", make_ref, resolve_ref), Codec("k", make_ref, resolve_ref)


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
             "nan": float("nan"), "dtype": np.float32, "dt": np.dtype("int64"), "f": np.tanh,
             "ints": [1, -2 ** 60, 2 ** 53 - 1, 2 ** 53, (True, 0, -(2 ** 53) + 1), [3, 2 ** 80]]}
    got = cross(grader, kernel, value)
    assert got["ints"] == value["ints"] and type(got["ints"][4][0]) is bool  # (ints in a list go inline)
    assert got["a"] == value["a"] and got[3] == value[3] and got["big"] == 2 ** 70 and np.isnan(got["nan"])
    assert got["dtype"] is np.float32 and got["dt"] == np.dtype("int64") and got["f"] is np.tanh


def test_a_class_is_sent_by_reference_at_once_only_when_no_object_of_it_could_travel_by_value():
    """The codec learns the classes whose objects always go as references (1.3's 10,000 nodes in
    one list). An object array, a class, a function of the student's teach it nothing: an array of
    floats, a NumPy type and NumPy's functions still travel by value."""
    _, kernel = pair()

    class Node:
        pass

    class Count(int):  # (an int's subclass always goes by reference)
        pass

    def sum(x):  # the student's, by NumPy's name
        return x

    def body(value):
        return kernel.encode_message(value)["body"]

    Anonymous = eval("type('Anonymous', (), {})", {})  # made where no __name__ is: it has no __module__
    sent = [np.array([None], dtype=object), Node, sum, Node(), Count(3), Anonymous()]
    assert body(sent) == {"list": [{"handle": id(v)} for v in sent]}
    assert kernel.by_reference == {Node, Count, Anonymous}
    assert "array" in body(np.ones(2)) and body(np.float64) == {"numpy_type": "float64"} and body(np.tanh) == {
        "numpy": "tanh"}
    torch = pytest.importorskip("torch")
    sparse, unsent_dtype = torch.ones(2).to_sparse(), torch.complex32  # (the wire sends neither by value)
    assert body([sparse, unsent_dtype]) == {"list": [{"handle": id(sparse)}, {"handle": id(unsent_dtype)}]}
    assert "tensor" in body(torch.ones(2)) and body(torch.float64) == {"torch_dtype": "float64"}


@pytest.mark.parametrize("message", [
    {"owners": {"k1": {"dtype": "object", "shape": [1], "data": ""}}, "body": None},  # no object arrays
    {"owners": {"k1": {"dtype": "float64", "shape": [2], "data": "AAAA"}}, "body": None},  # wrong size
    {"owners": {"k1": {"dtype": "float64", "shape": [1], "data": "AAAAAAAAAAA="}},
     "body": {"array": "k1", "dtype": "float64", "shape": [3], "strides": [8], "offset": 0}},  # outside
    {"owners": {"k1": {"dtype": "float64", "shape": [1], "data": "AAAAAAAAAAA="}},
     "body": {"array": "k1", "dtype": "float64", "shape": [1 << 30], "strides": [0], "offset": 0}},  # huge
    {"owners": {}, "body": {"pickle": "gASVAAAA"}},
    {"owners": {}, "body": {"array": "nowhere", "dtype": "float64", "shape": [], "strides": [], "offset": 0}},
    {"owners": {}, "body": {"int": "5", "class": 3}},  # a class number goes with a reference only
    {"owners": {}, "body": {"handle": 1, "class": "3"}},
    {"owners": {}, "body": {"handle": 1, "callback": 2, "class": 3}},
    {"owners": {}, "body": {"function": ["lambda", "lambda: 0", [], []]}},  # code never travels to the grader
])
def test_malformed_messages_are_refused(message):
    _, kernel = pair()
    with pytest.raises(WireError):
        kernel.decode_message(message)


class _Forged:
    """The grader's end of the channel, fed the messages a forged kernel sends, in order."""

    def __init__(self, messages):
        self.messages = [m if type(m) is bytes else json.dumps({"seq": n, "message": m}).encode()
                         for n, m in enumerate(messages, 1)]

    def poll(self, timeout):
        return bool(self.messages)

    def recv(self, limit=None, timeout=None):
        return self.messages.pop(0)


# What a recording's answer holds, and values of the shapes it holds them in.
_FIELDS = st.sampled_from(["value", "raised", "error", "stable", "warnings", "delegated", "depth", "answers",
                           "types", "message", "frames", "exception", "callback", "builtin", "args", "kwargs",
                           "promise"])
_ATOMS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4),
                   st.sampled_from(["getattr", "call", "len", "class", "method", "ValueError", "sync"]),
                   st.builds(np.zeros, st.integers(0, 3)))
_VALUES = st.recursive(_ATOMS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                       st.dictionaries(_FIELDS, inner, max_size=4)), max_leaves=10)
# Messages that the kernel's codec makes of forged answers, and messages that follow no codec.
_KERNEL_CODEC = Codec("k", lambda obj: ("handle", 1, 2), None)
_RAW = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4)), lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["owners", "body", "k1", "array", "dtype", "shape", "data",
                                                                  "int", "float", "dict", "tuple", "handle", "class"]),
                                                 inner, max_size=3)), max_leaves=10)
_MESSAGES = st.one_of(st.dictionaries(_FIELDS, _VALUES, min_size=1, max_size=5).map(_KERNEL_CODEC.encode_message),
                      st.fixed_dictionaries({"owners": _RAW, "body": _RAW}), st.binary(max_size=6))


@settings(max_examples=400, deadline=None)
@given(st.lists(_MESSAGES, min_size=1, max_size=4), st.sampled_from([None, "len"]), _RAW)
@example([_KERNEL_CODEC.encode_message({"callback": np.zeros(0), "builtin": "sync"})], None, None)  # (an array's ==)
def test_whatever_a_kernel_answers_is_a_verdict_on_it_never_a_fault_of_the_grader(messages, builtin, parent):
    """A fault of the grader fails the notebook's grading (GraderFault, below): no answer of a
    forged kernel may raise one, or any error but the refusal of its data (WireError), the
    student's exception, or the kernel gone. A call either takes the answer or ends in one of
    those. The answers come on the checks' socket (a record, a forged record, bytes that are not
    JSON); when they run out, the kernel's shell channel has a reply with any parent header, then
    the reply to the cell."""
    remote = verdicts.Remote(None, 60)
    remote.socket, remote.deadline = _Forged(messages), float("inf")
    replies = [{"parent_header": parent}, {"parent_header": {"msg_id": remote.msg_id}}]
    remote.client = types.SimpleNamespace(get_shell_msg=lambda timeout: replies.pop(0))
    remote._post = lambda fields: None
    remote.found, remote.caught, remote.deepest = [], [], [0]
    try:
        remote.call(None, 1, builtin=builtin)
    except (WireError, verdicts.StudentError, verdicts.KernelGone):
        pass


@pytest.mark.parametrize("kernel_sends, refused", [
    (Channel.LENGTH.pack(verdicts.MAX_ANSWER_CHARS + 1), WireError),  # a length past the limit: not read, refused
    (Channel.LENGTH.pack(10) + b"abc", verdicts.TestTimeout),  # a message begun and never ended: the time limit
    (None, verdicts.KernelGone),  # the kernel's end closed
])
def test_the_channel_refuses_what_a_kernel_cannot_be_waited_for(kernel_sends, refused):
    """The grader reads no message longer than the checks accept (it does not wait for its bytes),
    waits for a message's bytes no longer than the test's time limit, and takes a closed channel
    for a kernel gone."""
    ours, theirs = socket.socketpair()
    remote = verdicts.Remote(None, 60)
    remote.socket, remote.deadline = Channel(ours), time.monotonic() + 1.0
    with theirs:
        if kernel_sends is None:
            theirs.close()
        else:
            theirs.sendall(kernel_sends)
        started = time.monotonic()
        with pytest.raises(refused):
            remote._answer()
    assert time.monotonic() - started < 5
    ours.close()


class _CountedReads:
    """A socket that counts its reads."""

    def __init__(self, sock):
        self.sock, self.reads = sock, 0

    def recv_into(self, buffer):
        self.reads += 1
        return self.sock.recv_into(buffer)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def test_the_channel_reads_a_batch_of_messages_at_once_and_each_whole():
    """The calls that make come in batches (one write): one read takes a batch, and each message
    comes out whole and in order, a message longer than a read's chunk too; after the batch, the
    end of the channel is an EOFError, even in the middle of a message."""
    ours, theirs = socket.socketpair()
    channel = Channel(_CountedReads(ours))
    batch = [json.dumps({"seq": i, "message": "x" * i}).encode() for i in range(64)]
    Channel(theirs).send_many(batch)
    got = [channel.recv(timeout=5) for _ in batch]
    assert got == batch and channel.sock.reads == 1 and not channel.poll(0)
    long = bytes(range(256)) * (3 * Channel.CHUNK // 256 + 1)
    Channel(theirs).send_many([b"short", long, b"after"])
    assert [channel.recv(timeout=5) for _ in range(3)] == [b"short", long, b"after"]
    theirs.sendall(Channel.LENGTH.pack(5) + b"whole" + Channel.LENGTH.pack(10) + b"half")
    theirs.close()
    assert channel.poll(0) and channel.recv(timeout=5) == b"whole"
    with pytest.raises(EOFError):
        channel.recv(timeout=5)
    ours.close()


def _a_kernel():
    km, kc = kernels.start_new_kernel()
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


kernel = pytest.fixture(scope="module", name="kernel")(_a_kernel)


def run(kernel, student_code, test_code):
    """Run ``student_code`` in the kernel, then ``test_code`` outside it; the test cell's outputs."""
    km, kc = kernel
    reply = kc.execute_interactive(student_code, timeout=60, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok"
    return verdicts.run_test_cell(verdicts.Remote(kc, 60, kc.get_connection_info()), test_code, {})


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
    # work left for when the result is read, or done in a thread, keeps the call's rules (red team, stop 41)
    ("class Later:\n    def __init__(self, x):\n        self.x = x\n    def __array__(self, dtype=None, copy=None):\n"
     "        import warnings; warnings.warn('careful')\n        return np.maximum(self.x, 0)\n"
     "def relu(x):\n    return Later(x)", "emitted UserWarning"),
    ("class Later:\n    def __init__(self, x):\n        self.x = x\n    def __array__(self, dtype=None, copy=None):\n"
     "        import torch\n        return torch.relu(torch.as_tensor(self.x)).numpy()\n"
     "def relu(x):\n    return Later(x)", "your solution calls torch"),
    ("import threading\ndef relu(x):\n    box = []\n    def work():\n        import torch\n"
     "        box.append(torch.relu(torch.as_tensor(x)).numpy())\n"
     "    t = threading.Thread(target=work)\n    t.start()\n    t.join()\n    return box[0]", "your solution calls torch"),
])
def test_a_wrong_answer_fails_with_the_checks_message(kernel, code, message):
    (out,) = run(kernel, "import numpy as np\n" + code, TEST)
    assert out["output_type"] == "error" and message in out["evalue"], out


def test_a_kernel_that_forges_the_recording_still_fails(kernel):
    """The notebook replaces the recording's serve loop with one that answers every call with the
    argument it got (and says it never raised, warned or called torch): whatever it answers, the
    comparison happens here, against inputs chosen here."""
    forge = """
import json, sys
import numpy as np
def relu(x):
    return x
rec = sys.modules['autograder.inside.recording']
def serve(address):
    from autograder.inside.wire import Channel, Codec
    codec = Codec('k', lambda o: ('handle', 1), lambda kind, h, cls: None)
    reply, seq = {'ready': True}, 0
    sock = Channel.connect(address)
    while True:
        sock.send(json.dumps({'seq': seq, 'message': codec.encode_message(reply)}).encode())
        request = json.loads(sock.recv())
        if request.get('op') == 'end':
            sock.close()
            return
        seq = request['seq']
        call = codec.decode_message(request['message'])
        if request.get('builtin') == 'names':
            reply = {'value': {'names': {'relu': relu}, 'modules': {}}}
        else:
            reply = {'value': call['args'][-1] if call['args'] else None, 'warnings': [], 'delegated': []}
rec.serve = serve
"""
    run(kernel, "import autograder.inside.recording", "")
    (out,) = run(kernel, forge, TEST)
    kernel[1].execute_interactive("import importlib; importlib.reload(rec)", timeout=60, output_hook=lambda m: None)
    assert out["output_type"] == "error" and "[relu] case 'strided'" in out["evalue"], out


def test_a_serving_loop_that_never_connects_times_out_and_lets_the_next_cell_run(kernel):
    """The notebook replaces the serving loop with one that never connects to the worker's socket:
    the test cell ends at its time limit, and ending it does not wait on the socket (a send to a
    ZeroMQ pair socket with no peer blocked for good: the worker then held the notebook until its 300 s
    limit), so the next test cell runs, and passes."""
    import threading

    km, kc = kernel
    run(kernel, "import numpy as np\nimport autograder.inside.recording as rec\n"
                "def relu(x):\n    return np.maximum(x, 0)", "")
    kc.execute_interactive("import time\nrec.serve = lambda *args: [time.sleep(0.05) for _ in range(600)]",
                           timeout=60, output_hook=lambda m: None)
    remote = verdicts.Remote(kc, 2, kc.get_connection_info())
    with pytest.raises(verdicts.TestTimeout):
        verdicts.run_test_cell(remote, TEST, {})
    km.interrupt_kernel()
    ended = threading.Thread(target=remote.end, daemon=True)
    ended.start()
    ended.join(15)  # end() waits up to 10 s for the interrupted cell's reply
    assert not ended.is_alive(), "ending the timed-out test cell waited on the socket"
    kc.execute_interactive("import importlib; importlib.reload(rec)", timeout=60, output_hook=lambda m: None)
    assert verdicts.run_test_cell(verdicts.Remote(kc, 60, kc.get_connection_info()), TEST, {}) == []


def test_hidden_draws_are_the_students_own(kernel):
    """The worker draws a student's hidden cases with that student's seed (as the kernel would)."""
    from autograder.inside import checks

    printed = []
    for seed in (11, 12):
        with checks.student_seed_of(seed):
            (out,) = run(kernel, "x = 1", "print(checks.student_seed('probe'))")
        printed.append(int(out["text"]))
    assert printed == [checks.mix_seed(11, "probe"), checks.mix_seed(12, "probe")]


# --- what the course's test cells do with the student's objects --------------------------------------
def student_remote(kernel, student_code):
    """The student's code run in the kernel; a fresh Remote to it."""
    km, kc = kernel
    assert kc.execute_interactive(student_code, timeout=60, output_hook=lambda msg: None)["content"]["status"] == "ok"
    return verdicts.Remote(kc, 60, kc.get_connection_info())


def run_cells(kernel, student_code, *test_cells):
    """The student's code in the kernel, then each test cell outside it, on one Remote and one namespace
    (as the grader runs a notebook); the outputs of each test cell."""
    remote, namespace = student_remote(kernel, student_code), {}
    return [verdicts.run_test_cell(remote, cell, namespace) for cell in test_cells]


def test_a_function_of_the_test_runs_in_the_grader_when_the_students_code_calls_it(kernel):
    """A finite-difference exercise gets the test's f; an optimiser gets a generator of parameters."""
    student = ("import numpy as np\n"
               "def derivative(f, x, h=1e-6):\n    return (f(x + h) - f(x - h)) / (2 * h)\n"
               "def total(items):\n    return sum(item * 2 for item in items)\n")
    test = ("calls = []\n"
            "def f(x):\n    calls.append(x)\n    return x ** 3\n"
            "assert abs(derivative(f, 2.0) - 12.0) < 1e-4 and len(calls) == 2\n"
            "assert total(i for i in range(4)) == 12\n")
    assert run_cells(kernel, student, test) == [[]]


def test_a_visible_function_that_only_computes_runs_in_the_kernel(kernel):
    """A lambda or a def, from the visible part, reading numpy, arrays, the student's objects and
    other such functions, and taking such defaults, is compiled in the kernel: the student's calls of
    it cost no round trip. One that keeps a record, that reads itself, or that a hidden part wrote
    (its text must not enter the kernel), stays in the grader."""
    student = ("import numpy as np\n"
               "class Box:\n    def __init__(self, v):\n        self.v = v\n    def twice(self):\n        return 2 * self.v\n"
               "def apply_all(f, xs):\n    return [f(x) for x in xs]\n")
    test = ("W = np.arange(3.0)\n"
            "def cube(v):\n    \"\"\"v cubed, plus W.\"\"\"\n    return v ** 3 + W\n"
            "assert np.array_equal(apply_all(lambda v: np.tanh(Box(v).twice()) + W, [1.0, 2.0])[1], np.tanh(4.0) + W)\n"
            "assert np.array_equal(apply_all(cube, [2.0])[0], 8.0 + W)\n"
            "seen = []\n"
            "assert apply_all(lambda v: seen.append(v) or v, [5, 6]) == [5, 6] and seen == [5, 6]\n"
            "k = 2\nassert apply_all(lambda v, k=k: v * k, [3]) == [6]\n"
            "### BEGIN HIDDEN TESTS\n"
            "assert apply_all(lambda v: v + 1, [1]) == [2]\n"
            "### END HIDDEN TESTS\n")
    test_after = ("def fact(v):\n    return 1 if v <= 1 else v * fact(v - 1)\n"
                  "def twice_cube(v, *, times=2, inner=cube):\n    return times * inner(v)\n"
                  "assert apply_all(fact, [4]) == [24]\n"
                  "assert np.array_equal(apply_all(twice_cube, [1.0])[0], 2 * (1.0 + W))\n")
    remote = student_remote(kernel, student)
    handed, make_ref = [], remote.codec.make_ref  # what the grader hands over as callbacks
    remote.codec.make_ref = lambda obj: (handed.append(obj), make_ref(obj))[1]
    namespace = {}
    assert verdicts.run_test_cell(remote, test, namespace) == []
    kept = sorted({f.__code__.co_firstlineno for f in handed if isinstance(f, types.FunctionType)})
    assert kept == [8, 12], kept  # the lambda that appends to seen, the hidden one
    handed.clear()
    assert verdicts.run_test_cell(remote, test_after, namespace) == []
    assert [f.__name__ for f in handed if isinstance(f, types.FunctionType)] == ["fact"], handed  # (it reads itself)


def test_a_function_that_asserts_stays_in_the_grader_and_one_that_goes_reads_copies():
    """An ``assert`` or ``raise`` in the kernel is a verdict that the student's objects answer; the
    arrays a shipped function reads are copies, which the student's code may write into at no cost
    to the test (red team, stop 41)."""
    def asserts(x):
        assert x, "no"
        return x

    def raises(x):
        if not x:
            raise ValueError("no")
        return x

    def computes(x):
        return [v * 2 for v in x]

    assert not verdicts._pure(asserts.__code__) and not verdicts._pure(raises.__code__)
    assert verdicts._pure(computes.__code__)
    a = np.arange(3.0)
    remote = verdicts.Remote(None)
    copied = remote._copies((a, (a, 1), "s"))
    assert copied[0] is not a and np.array_equal(copied[0], a) and copied[1] == (copied[0], 1) and copied[2] == "s"
    assert remote._copies(a) is copied[0]  # one copy per array: the kernel knows it after its first trip


def test_a_visible_function_that_the_checks_run_as_the_students_code_is_one_request(kernel):
    """``checks.run_student`` on a test's function that drives the student's objects (1.8's chain of
    Adds) runs it in the kernel, in one request; one written in a hidden part runs here, a request
    per operation. The student's errors inside it read as the student's own."""
    km, kc = kernel
    kc.execute_interactive("class T:\n    def __init__(self, v):\n        self.v = v\n"
                           "    def __add__(self, other):\n        return T(self.v + other.v)\n"
                           "def broken(v):\n    raise ValueError('no')\n", timeout=60, output_hook=lambda m: None)
    test = ("from autograder.inside import checks\n"
            "def chain(n):\n    x = T(1)\n    y = x\n    for _ in range(n):\n        y = y + x\n    return y.v\n"
            "def fails(v):\n    total = 0\n    return broken(v) + total\n"
            "start = REMOTE.seq\n"
            "assert checks.run_student('chain', chain, 300) == 301\n"
            "COUNTS.append(REMOTE.seq - start)\n"
            "try:\n    checks.run_student('chain', fails, 1)\nexcept checks.CheckFailure as failure:\n"
            "    COUNTS.append(str(failure))\n"
            "### BEGIN HIDDEN TESTS\n"
            "def hidden_chain(n):\n    x = T(1)\n    y = x\n    for _ in range(n):\n        y = y + x\n    return y.v\n"
            "start = REMOTE.seq\n"
            "assert checks.run_student('chain', hidden_chain, 300) == 301\n"
            "COUNTS.append(REMOTE.seq - start)\n"
            "### END HIDDEN TESTS\n")
    remote, counts = verdicts.Remote(kc, 60, kc.get_connection_info()), []
    assert verdicts.run_test_cell(remote, test, {"REMOTE": remote, "COUNTS": counts}) == []
    assert counts[0] == 1 and counts[1] == "[chain] your code raised ValueError: no" and counts[2] > 300, counts


def test_with_blocks_exceptions_and_array_identity_reach_the_students_objects(kernel):
    student = ("import numpy as np\n"
               "class Boom(ValueError):\n    def __init__(self, index):\n        super().__init__(f'at {index}')\n"
               "        self.index = index\n"
               "def check(i):\n    raise Boom(i)\n"
               "class Guard:\n    def __enter__(self):\n        self.inside = True\n        return self\n"
               "    def __exit__(self, kind, exc, tb):\n        self.inside, self.saw = False, kind is not None\n"
               "class Box:\n    def __init__(self, a):\n        self.a = a\n")
    test = ("try:\n    check(3)\nexcept ValueError as e:\n    assert isinstance(e, Boom) and e.index == 3, e\n"
            "else:\n    raise AssertionError('no exception')\n"
            "g = Guard()\nwith g as inside:\n    assert inside.inside\nassert not g.inside and not g.saw\n"
            "a = np.arange(3.0)\nbox = Box(a)\nassert box.a is a and box.a is box.a\n")
    assert run_cells(kernel, student, test) == [[]]


def test_a_helper_may_define_classes_on_the_students_class_and_call_super(kernel):
    """A test's helper builds a model on the student's base class, closing over its arguments."""
    student = "class Module:\n    def __init__(self):\n        self.children = []\n"
    test = ("import types\n"
            "def build(nn, width):\n"
            "    class Layer(nn.Module):\n"
            "        def __init__(self):\n            super().__init__()\n            self.width = width\n"
            "        @staticmethod\n        def kind():\n            return 'layer'\n"
            "    return Layer()\n"
            "layer = build(types.SimpleNamespace(Module=Module), 5)\n"
            "assert layer.width == 5 and layer.children == [] and layer.kind() == 'layer'\n")
    assert run_cells(kernel, student, test) == [[]]


def test_a_student_cell_cannot_replace_a_helper_of_the_tests(kernel):
    """A helper that a test cell defined stays the test's, whatever the notebook later binds to its name;
    a student's object that a test bound follows the notebook when a cell rebinds it."""
    km, kc = kernel
    remote, namespace = verdicts.Remote(kc, 60, kc.get_connection_info()), {}
    kc.execute_interactive("value = 1\ndef double(x):\n    return 2 * x", timeout=60, output_hook=lambda m: None)
    assert verdicts.run_test_cell(remote, "def judge(x):\n    assert double(x) == 2 * x, 'wrong'\njudge(3)", namespace) == []
    kc.execute_interactive("def judge(x):\n    pass\ndef double(x):\n    return x", timeout=60, output_hook=lambda m: None)
    (out,) = verdicts.run_test_cell(remote, "judge(3)", namespace)
    assert out["output_type"] == "error" and "wrong" in out["evalue"], out


def test_a_class_in_the_hidden_part_never_enters_the_kernel(kernel):
    """Making a class on a student's class sends its text to the kernel: from a hidden part it is refused.
    The notebook listens where such text would arrive (the recording's `define`), and hears nothing."""
    student = ("import autograder.inside.recording as rec\n"
               "heard, define = [], rec.BUILTINS['define']\n"
               "rec.BUILTINS['define'] = lambda source, name: heard.append(source) or define(source, name)\n"
               "class Module:\n    pass\n")
    test = ("### BEGIN HIDDEN TESTS\nclass Probe(Module):\n    pass\n### END HIDDEN TESTS\n")
    ((out,),) = run_cells(kernel, student, test)
    km, kc = kernel
    seen = []
    kc.execute_interactive("print(len(heard)); rec.BUILTINS['define'] = define", timeout=60,
                           output_hook=lambda m: seen.append(m["content"].get("text", "")))
    assert out["output_type"] == "error" and "hidden part" in out["evalue"], out
    assert "".join(seen).strip() == "0"


def test_methods_and_class_functions_cost_one_request_and_follow_the_notebook(kernel):
    """`t.double()` on a student's object is one request once the grader knows `double` is a method of
    its class, and `Fn.forward` is looked up once per test cell; a later cell that rebinds either, or an
    object that shadows a method with its own attribute, is still seen as the kernel sees it."""
    km, kc = kernel
    remote, namespace = verdicts.Remote(kc, 60, kc.get_connection_info()), {}
    kc.execute_interactive("class T:\n    def __init__(self, v):\n        self.v = v\n"
                           "    def double(self):\n        return T(2 * self.v)\n"
                           "class Fn:\n    @staticmethod\n    def forward(x):\n        return x + 1\n",
                           timeout=60, output_hook=lambda m: None)
    test = ("start = REMOTE.seq\n"
            "t = T(1)\n"  # 1 request
            "assert t.double().double().v == 4\n"  # the first double: 2 (look up, call), then 1 each, .v 1
            "assert Fn.forward(1) == 2 and Fn.forward(2) == 3\n"  # the first forward: 2, then 1
            "COUNTS.append(REMOTE.seq - start)\n")
    counts = []
    namespace.update(REMOTE=remote, COUNTS=counts)
    assert verdicts.run_test_cell(remote, test, namespace) == []
    assert counts == [1 + 3 + 1 + 3], counts
    kc.execute_interactive("T.double = lambda self: T(3 * self.v)\nFn.forward = staticmethod(lambda x: x - 1)\n"
                           "shadowed = T(5)\nshadowed.double = lambda: 'own'\n", timeout=60, output_hook=lambda m: None)
    test = ("assert T(1).double().v == 3 and Fn.forward(1) == 0\n"
            "assert shadowed.double() == 'own'\n")
    assert verdicts.run_test_cell(remote, test, namespace) == []


def test_expected_values_from_a_locked_cell_are_computed_by_the_course_code_not_the_kernels(kernel, tmp_path):
    """``checks.locked_cell`` runs the source notebook's locked cell in the grader: a student cell that
    rebinds what that cell defined (here ``scale``, which the test needs for its expected value) changes
    the student's answer only, so a wrong answer stays wrong."""
    import nbformat

    locked = "def scale(x):\n    return 3.0 * x\n"
    source = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(locked, metadata={"nbgrader": {
        "grade": False, "grade_id": "machinery", "locked": True, "solution": False, "schema_version": 3}})])
    path = tmp_path / "source.ipynb"
    nbformat.write(source, str(path))
    km, kc = kernel
    tampered = locked + "".join(["def ", "sca", "le(x):\n    return 0.0 * x\n"])  # the cell, then a student's rebinding
    answer = "def triple(x):\n    return 0.0 * x\n"  # wrong, and equal to the tampered scale
    assert kc.execute_interactive(tampered + answer, timeout=60, output_hook=lambda msg: None)["content"]["status"] == "ok"
    test = ("from autograder.inside import checks\n"
            "x = np.arange(3.0)\n"
            "checks.assert_close(triple(x), checks.locked_cell('machinery').scale(x), task='triple', name='y')\n")
    remote = verdicts.Remote(kc, 60, kc.get_connection_info(), str(path))
    (out,) = verdicts.run_test_cell(remote, test, {})
    assert out["output_type"] == "error" and "[triple]" in out["evalue"]
    # the same test against the kernel's own names, as in a notebook, is fooled: that is what the locked cell prevents
    fooled = test.replace("checks.locked_cell('machinery').scale(x)", "scale(x)")
    assert verdicts.run_test_cell(remote, fooled, {}) == []
    with pytest.raises(LookupError):
        remote.locked_cell("nowhere")


def test_the_kernel_names_no_module_for_the_grader_to_import(kernel):
    """A module bound in the notebook is bound in the test only when it is one of NOTEBOOK_MODULES, by its
    exact name: a fake module named after a standard package's ``__main__`` (whose import runs a program
    in the worker) is not imported."""
    import sys

    student = "import types as t_, re as re_\nmod_ = t_.ModuleType('venv.' + '__main__')\n"
    test = "assert re_.fullmatch('a+', 'aa')\nassert 'mod_' not in dir()\n"
    assert run_cells(kernel, student, test) == [[]]
    assert "venv.__main__" not in sys.modules


def test_what_the_kernel_sends_cannot_steer_the_grader(kernel):
    """NumPy functions that are not ufuncs (np.seterrcall, np.save) come back as the student's objects, not
    as the worker's own; a StopIteration of the student's code is not one in the worker (it would end a `map`)."""
    student = ("import numpy as np\n"
               "def which():\n    return np.seterrcall, np.tanh\n"
               "def boom(_):\n    raise StopIteration('early')\n")
    test = ("found, tanh = which()\n"
            "assert found is not np.seterrcall and tanh is np.tanh\n"
            "try:\n    list(map(boom, [1, 2]))\nexcept Exception as e:\n    caught = e\n"
            "assert type(caught).__name__ == 'StopIteration' and not isinstance(caught, StopIteration)\n")
    assert run_cells(kernel, student, test) == [[]]
    grader_side = Codec("t", None, None, namespaces=True)
    with pytest.raises(WireError):
        grader_side.decode_message({"owners": {}, "body": {"numpy": "save"}})


def test_torch_tensors_keep_their_storage_layout_and_aliasing():
    """1.6's torch exercises: views of one storage stay views of one storage, an empty storage stays
    one without memory, a write reaches the other side, and a tensor sent back is the same tensor."""
    torch = pytest.importorskip("torch")
    grader, kernel = pair()
    x = torch.arange(12.0, dtype=torch.float64).reshape(3, 4)
    sent = [x, x[1:], x.t(), x[:, None].expand(3, 2, 4), x[2, 1], x[3:], torch.empty(0), torch.zeros(0, 3),
            torch.arange(5, dtype=torch.int32), torch.randn(3, requires_grad=True), x.shape, torch.float32]
    got = cross(grader, kernel, sent)

    def storage(t):
        return t.untyped_storage().data_ptr()

    for a, b in zip(sent[:10], got):
        assert (a.dtype, a.shape, a.stride(), a.storage_offset(), a.requires_grad) == (
            b.dtype, b.shape, b.stride(), b.storage_offset(), b.requires_grad)
        assert torch.equal(a.detach(), b.detach())
    assert len({storage(t) for t in got[:6]}) == 1 and storage(got[0]) != 0, "views of x share one storage"
    assert storage(got[6]) == storage(got[7]) == 0, "empty tensors have no memory, as in the grader"
    assert got[10] == (3, 4) and got[11] is torch.float32
    got[1][0, 0] = -1.0  # the student's code writes into a view
    back = cross(kernel, grader, got[1])
    assert x[1, 0] == -1.0 and back is sent[1], "the write reaches the grader's storage; the same view comes back"


def test_a_numpy_only_side_refuses_a_tensor(monkeypatch):
    torch = pytest.importorskip("torch")
    from autograder.inside import wire

    grader, kernel = pair()
    message = json.loads(json.dumps(grader.encode_message(torch.zeros(2))))
    monkeypatch.setattr(wire, "_torch", lambda importing=False: None)
    with pytest.raises(WireError, match="no torch"):
        kernel.decode_message(message)


ENGINE_STUDENT = """import numpy as np
def uses(engine):
    t = engine.Tensor(np.arange(3.0))
    t.grad = np.ones(3)
    return float(engine.Double.apply(t).data.sum()), t.grad.tolist()
def reach(obj, name):
    return type(getattr(obj, name)).__name__
def mark(cls):
    cls.marked = True
def message(fn):
    try:
        fn()
    except TypeError as error:
        return str(error)
"""
ENGINE_TEST = """import types
class Tensor:
    lends = frozenset({"data", "grad"})
    def __init__(self, data):
        self.data, self.grad, self.secret = np.asarray(data), None, "how this engine was built"
class Double:
    lends = frozenset({"apply"})
    @classmethod
    def apply(cls, t):
        return Tensor(2 * t.data)
engine = types.SimpleNamespace(Tensor=Tensor, Double=Double)
assert uses(engine) == (6.0, [1.0, 1.0, 1.0])
assert message(Double.apply) == "the grader's object raised TypeError", message(Double.apply)  # not its name
for obj, name in [(Double.apply, "__func__"), (Tensor, "__dict__"), (Tensor(1.0), "_private"), (Tensor(1.0), "secret"),
                  (Double, "lends"), (checks.run_student, "__globals__"), (checks, "run_student"), (Tensor, "__init__")]:
    try:
        got = reach(obj, name)
    except AttributeError as error:
        assert "lends no attribute" in str(error), error
    else:  # (a dunder of the kernel's own stand-in is no object of the grader's)
        assert got != "Callback", f"the student's code reached {name} of the grader's {obj!r}"
try:
    mark(Double)
except AttributeError:
    pass
else:
    raise AssertionError("the student's code marked a class of the tests")
assert not hasattr(Double, "marked")
"""


def test_the_tests_objects_lend_only_the_attributes_they_declare(kernel):
    """1.8's engines stay in the grader: the student's tests read and write the attributes their
    classes lend, and reach nothing else of the grader's (a function's globals, a module, a builtin,
    how an engine was built, the names in an error's message)."""
    assert run_cells(kernel, ENGINE_STUDENT, ENGINE_TEST) == [[]]


def test_references_are_let_go_on_both_sides():
    """Objects that crossed live only as long as the other side holds them: a long run of calls keeps
    only a few alive, so that no message compares every buffer ever sent. (A kernel of its own: the
    grader talks to a kernel through one Remote, and callback numbers are that Remote's.)"""
    km, kc = kernels.start_new_kernel()
    student = "def each(make, n):\n    return sum(float(make(i).data[0]) for i in range(n))\n"
    assert kc.execute_interactive(student, timeout=60, output_hook=lambda msg: None)["content"]["status"] == "ok"
    test = ("class Box:\n    lends = frozenset({'data'})\n    def __init__(self, i):\n        self.data = np.full(3, float(i))\n"
            "assert each(Box, 500) == sum(range(500))\n"
            "boxes = [Box(i) for i in range(3)]\n")
    remote = verdicts.Remote(kc, 60, kc.get_connection_info())
    assert verdicts.run_test_cell(remote, test, {}) == []
    try:
        assert len(remote.callbacks) <= 5 and len(remote.codec.owners.by_id) <= 10, (
            len(remote.callbacks), len(remote.codec.owners.by_id))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_buffer_that_dies_while_the_tables_are_read_leaves_them_as_they_are():
    """The garbage collector runs a weak reference's callback at any allocation, in any thread: in
    the middle of an iteration over the codec's buffer table too. The callback only notes the
    death, and the table is pruned at the next message. (CI once saw a correct 1.5 notebook lose a
    cell to "dictionary changed size during iteration", blamed on the student's gradcheck:
    `Owners.changed` read the table while a collection inside it dropped an entry.)"""
    from autograder.inside.wire import Owners

    owners = Owners("k")
    arrays = [np.zeros(2) for _ in range(4)]
    keys = [owners.id_for(a) for a in arrays]
    reading = iter(owners.by_id.items())
    next(reading)
    del arrays[0]  # the last reference: its callback runs now, in the middle of the reading
    assert len(list(reading)) == 3, "a callback changed the table while it was read"
    again = np.zeros(2)  # made before the table was pruned (maybe at the dead array's address): a new buffer
    fresh = owners.id_for(again)
    assert owners.changed() == keys[1:] + [fresh]  # pruned at the message: the dead buffer is gone
    assert keys[0] not in owners.by_id and owners.ids[id(again)] == fresh


def test_a_proxy_that_dies_mid_request_is_dropped_at_the_next_message():
    """The same for the grader's proxies of the student's objects: the callback notes, and the next
    message drops the handle, unless the kernel sent it again in between (then its new proxy lives)."""
    remote = verdicts.Remote(None)
    first, second = remote._resolve("handle", 7), remote._resolve("handle", 8)
    del first, second
    assert set(remote.proxies) == {7, 8} and remote.dropped == []  # noted, not yet dropped
    again = remote._resolve("handle", 8)  # sent again before the grader's next message
    remote._drop_lost()
    assert remote.dropped == [7] and set(remote.proxies) == {8} and remote._resolve("handle", 8) is again


def test_a_fault_of_the_graders_own_code_is_no_verdict_on_the_student(own_kernel, monkeypatch):
    """An error of the grader's own exchange code (stop 24's: the buffer table read while a
    collection changed it) is no verdict: it passes the checks' and the test cell's ``except``s
    (1.8's differential tests count any CheckFailure as a planted bug caught) as a GraderFault,
    which fails the notebook's grading. Data that the checks refuse stays the student's verdict."""
    from autograder.inside.wire import Owners

    km, kc = own_kernel
    remote = student_remote(own_kernel, "import numpy as np\ndef relu(x):\n    return np.maximum(x, 0)\n")
    test = ("try:\n    checks.run_student('relu', relu, np.ones(3))\nexcept Exception as exc:\n"
            "    print('the test cell took it:', exc)\n")
    changed = Owners.changed

    def read_while_it_changes(self):
        raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(Owners, "changed", read_while_it_changes)
    try:
        with pytest.raises(verdicts.GraderFault, match=r"^RuntimeError: dictionary changed size during iteration "
                                                       r"\(in test_verdicts.py, line \d+, read_while_it_changes\)"):
            verdicts.run_test_cell(remote, test, {})
    finally:
        monkeypatch.setattr(Owners, "changed", changed)
        remote.end()
    # the notebook's codec sends the grader a pickle, which the grader's refuses (WireError): the
    # student's doing, as its answer to a call and as its first message
    pickle = "{'owners': {}, 'body': {'pickle': 'gASVAAAA'}}"
    forged = ("def relu(x):\n    return x\nimport autograder.inside.recording as r\nsend = r.Codec.encode_message\n"
              f"r.Codec.encode_message = lambda self, p: {pickle} if 'ndarray' in repr(type(p.get('value'))) else send(self, p)\n")
    (out,) = run_cells(own_kernel, forged, "checks.run_student('relu', relu, np.ones(3))")[0]
    assert out["output_type"] == "error" and out["evalue"].startswith("[relu]"), out
    (out,) = run_cells(own_kernel, f"r.Codec.encode_message = lambda self, p: {pickle}", "relu(1)")[0]
    assert out == verdicts.error_output(WireError("unknown value kind 'pickle'")), out


def test_a_cell_that_ends_in_a_value_leaves_it_as_its_partial_grade(kernel):
    """nbgrader reads a test cell's last expression as its grade (1.8's share of planted bugs caught):
    the grader leaves the value it computed; a student's object would let the kernel choose it."""
    out = run_cells(kernel, "def half():\n    return 0.5\nclass Grade:\n    pass\n",
                    "round(20 * half(), 2)", "Grade()", "x = 1", "str(half())", "half() > 0")
    assert out[0] == [{"output_type": "execute_result", "execution_count": None, "metadata": {},
                       "data": {"text/plain": "10.0"}}]
    assert out[1][0]["output_type"] == "error" and "student's object" in out[1][0]["evalue"]
    assert out[2:] == [[], [], []], "a value that is not a number is no grade (a bool neither)"


def test_a_write_after_the_last_callback_reaches_the_grader(kernel):
    """A central difference perturbs x, calls the test's f, and restores x after the last call: the
    answer carries the restore, though the buffers were let go at each callback's message."""
    student = ("import numpy as np\n"
               "def probe(f, x):\n    for i in range(x.size):\n        old = x.flat[i]\n"
               "        x.flat[i] = old + 1.0\n        f(x)\n        x.flat[i] = old\n    return 0.0\n")
    test = ("calls = []\n"
            "def f(v):\n    calls.append(v.copy())\n    return float(v.sum())\n"
            "x = np.arange(3.0)\n"
            "assert probe(f, x) == 0.0 and len(calls) == 3 and x.tolist() == [0.0, 1.0, 2.0], x\n"
            "assert [c.tolist() for c in calls] == [[1, 1, 2], [0, 2, 2], [0, 1, 3]], calls\n")
    assert run_cells(kernel, student, test) == [[]]


KEPT_STUDENT = """import numpy as np
def reads(engine, n):
    t, seen = engine.Tensor(np.arange(3.0)), []
    for _ in range(n):
        out = engine.Double.apply(t)
        seen.append((float(t.data.sum()), float(out.data.sum()), t.grad is None))
    return seen
def after_writes(engine):
    t = engine.Tensor(np.arange(3.0))
    a = float(t.data.sum())
    engine.Rebind.apply(t)
    b = float(t.data.sum())
    engine.Scale.apply(t)
    c = float(t.data.sum())
    engine.SetGrad.apply(t)
    g = t.grad.tolist()
    t.grad = None
    t.data[0] = 100.0
    return a, b, c, g, t.grad, engine.Peek.apply(t)
def many(engine, n):
    ts = [engine.Tensor(np.full(2, float(i))) for i in range(n)]
    first = [float(t.data[0]) for t in ts]
    engine.Bump.apply(ts)
    return first, [float(t.data[0]) for t in ts]
"""
KEPT_TEST = """import types
class Tensor:
    lends = frozenset({"data", "grad"})
    def __init__(self, data):
        self.data, self.grad = np.asarray(data, dtype=float), None
def op(fn):
    return type(fn.__name__, (), {"lends": frozenset({"apply"}), "apply": classmethod(lambda cls, t: fn(t))})
def rebind(t):
    t.data = t.data + 10.0
def scale(t):
    t.data *= 2.0
def set_grad(t):
    t.grad = np.ones(3)
def peek(t):
    return (float(t.data[0]), t.grad)
def bump(ts):
    for t in ts:
        t.data = t.data + 1.0
engine = types.SimpleNamespace(Tensor=Tensor, Double=op(lambda t: Tensor(2 * t.data)), Rebind=op(rebind),
                               Scale=op(scale), SetGrad=op(set_grad), Peek=op(peek), Bump=op(bump))
assert reads(engine, 50) == [(3.0, 6.0, True)] * 50
assert after_writes(engine) == (3.0, 33.0, 66.0, [1.0, 1.0, 1.0], None, (100.0, None))
first, second = many(engine, 100)
assert second == [v + 1.0 for v in first] == [i + 1.0 for i in range(100)], second
"""


def test_what_the_kernel_keeps_of_the_tests_objects_follows_their_changes(kernel):
    """1.8's property tests read each tensor's ``data`` and ``grad`` and call ``Op.apply`` thousands
    of times: the kernel keeps what it read of the tests' objects, and the grader's messages carry
    the new values of what its code changed, so only the first reads are callbacks. What either
    side writes reaches the other: a rebinding, a write into an array in place, past what the
    grader follows (100 tensors)."""
    remote, asked = student_remote(kernel, KEPT_STUDENT), []
    run_callback = remote._run_callback
    remote._run_callback = lambda ask: (asked.append(ask.get("builtin")), run_callback(ask))[1]
    assert verdicts.run_test_cell(remote, KEPT_TEST.split("assert after_writes")[0], {}) == []
    # the Tensor, Double.apply once, t.data, out.data, t.grad once each: later outs come with their data and grad
    assert asked.count("call") == 51 and asked.count("getattr") <= 4, asked
    assert verdicts.run_test_cell(remote, KEPT_TEST, {}) == []


def test_the_backwards_of_an_engines_ops_are_one_request(kernel):
    """1.5's find_the_bug test learns which op an engine breaks by running each op's forward and
    backward beside the course's: the student's engine runs them all in one request."""
    student = ("import numpy as np, types\nclass Context:\n    pass\n"
               "class Double:\n    @staticmethod\n    def forward(ctx, x):\n        ctx.x = x\n        return 2 * x\n"
               "    @staticmethod\n    def backward(ctx, grad):\n        return 2 * grad\n"
               "class Wrong(Double):\n    @staticmethod\n    def backward(ctx, grad):\n        return 3 * grad, None\n"
               "engine = types.SimpleNamespace(Double=Double, Triple=Wrong, Again=Double)\n")
    test = ("import types\nfrom autograder.inside import checks\n"
            "class Ref:\n    @staticmethod\n    def forward(ctx, x):\n        return 2 * x\n"
            "    @staticmethod\n    def backward(ctx, grad):\n        return 2 * grad\n"
            "probes = {name: (checks.randn(i, 2, 3),) for i, name in enumerate(['Double', 'Triple', 'Again'])}\n"
            "broken = checks.differing_backwards(engine, dict.fromkeys(probes, Ref), probes, Context,\n"
            "                                    reference_context=types.SimpleNamespace)\n"
            "assert broken == ['Triple'], broken\n")
    remote, requests = student_remote(kernel, student), []
    request = remote.request
    remote.request = lambda payload, **fields: (requests.append(fields.get("builtin")), request(payload, **fields))[1]
    assert verdicts.run_test_cell(remote, test, {}) == []
    assert requests.count("engine_backwards") == 1 and len(requests) <= 2, requests  # (and the notebook's names)


def test_a_notebooks_builtin_names_never_reach_a_test_cell(own_kernel):
    """A test cell's builtins are the grader's: a notebook's enumerate, range or ValueError is not
    bound in its scope, where it would shadow the builtin for the test and its helpers (a loop over
    no cases, an expect_raises that any error passes: red team, stop 40)."""
    student = ("enumerate = lambda *args: []\nrange = lambda *args: []\n"
               "class ValueError(Exception):\n    pass\ndef fails():\n    raise KeyError('no')\n")
    test = ("import builtins\nfrom autograder.inside import checks\n"
            "assert enumerate is builtins.enumerate and range is builtins.range and ValueError is builtins.ValueError\n"
            "assert list(enumerate('ab')) == [(0, 'a'), (1, 'b')] and len(range(3)) == 3\n"
            "checks.expect_raises('fails', ValueError, fails)\n")
    outputs = run(own_kernel, student, test)  # (its own kernel: the module's keeps the builtins)
    assert [o["ename"] for o in outputs] == ["AssertionError"] and "KeyError" in outputs[0]["evalue"], outputs


def test_a_students_exception_class_names_cost_the_worker_little():
    """The grader makes a class per name of the student's exceptions: a name of megabytes, changed before
    each raise, filled the worker's memory (red team, stop 40). Names are cut, and the classes kept bounded."""
    for i in range(verdicts.MAX_ERROR_TYPES + 5):
        error = verdicts.student_exception([f"E{i}" + "x" * 100_000, "KeyError", "Exception"], "no", [])
    assert isinstance(error, KeyError) and len(type(error).__name__) == verdicts.MAX_ERROR_NAME
    assert len(verdicts._ERROR_TYPES) <= verdicts.MAX_ERROR_TYPES


def callbacks_asked(kernel, student, test):
    """Run ``test`` (which must pass) on ``student``'s code; what the kernel asked of the test's
    objects meanwhile, by kind (``"call"``, ``"getattr"``...), in order."""
    remote, asked = student_remote(kernel, student), []
    run_callback = remote._run_callback
    remote._run_callback = lambda ask: (asked.append(ask.get("builtin")), run_callback(ask))[1]
    assert verdicts.run_test_cell(remote, test, {}) == []
    return asked


def test_an_engines_backward_rules_stay_in_the_grader(own_kernel):
    """1.5's find_the_bug test hands over engines whose backward rules are the grader's
    (``checks.backwards_in_grader``): the kernel's make_engine is called with no argument, its
    classes get a backward that asks the grader's rule, with what forward kept in ctx, in one
    round trip, and what comes back is that rule's gradient."""
    student = ("import numpy as np, types\nclass Context:\n    pass\n"
               "class Double:\n    @staticmethod\n    def forward(ctx, x):\n        ctx.x = x\n        return 2 * x\n"
               "    @staticmethod\n    def backward(ctx, grad):\n        return 2 * grad\n"
               "made = []\n"
               "def make_engine(*args, **kwargs):\n    made.append([len(args), len(kwargs)])\n"
               "    return types.SimpleNamespace(Double=Double, Triple=Double)\n"
               "def probe(engine):\n    out = []\n    for name in ('Double', 'Triple'):\n        ctx = Context()\n"
               "        getattr(engine, name).forward(ctx, np.arange(3.0))\n"
               "        out.append(getattr(engine, name).backward(ctx, np.full(3, 0.5)))\n    return out\n"
               "def calls():\n    return made\n")
    test = ("import types\nimport numpy as np\nfrom autograder.inside import checks\n"
            "class Twice:\n    @staticmethod\n    def backward(ctx, grad):\n        return grad * 2 * ctx.x\n"
            "class Thrice:\n    @staticmethod\n    def backward(ctx, grad):\n        return grad * 3 * ctx.x\n"
            "engine = checks.backwards_in_grader(types.SimpleNamespace(Double=Twice, Triple=Thrice), make_engine)\n"
            "twice, thrice = probe(engine)\n"
            "assert np.array_equal(twice, [0.0, 1.0, 2.0]) and np.array_equal(thrice, [0.0, 1.5, 3.0]), (twice, thrice)\n"
            "assert calls() == [[0, 0]], calls()  # one engine made, with no argument\n")
    assert callbacks_asked(own_kernel, student, test) == ["call", "call"]  # one round trip per backward


def test_a_tests_op_keeps_its_backward_rule_in_the_grader(own_kernel):
    """1.5's gradcheck tests hand over ops whose backward is wrong (or right) on purpose
    (``checks.op_in_grader``): the kernel gets a subclass of the notebook's Function with the test's
    forward and a backward that asks the grader's rule in one round trip; nothing in the kernel's
    class (its functions, their closures and constants) holds the rule's numbers, and what comes
    back is that rule's gradient."""
    student = ("import numpy as np\nclass Function:\n    pass\nclass Context:\n    pass\n"
               "def probe(op):\n    ctx = Context()\n    out = op.forward(ctx, np.arange(3.0))\n"
               "    return out, op.backward(ctx, np.ones(3))\n"
               "def reachable(op):\n    seen, todo = [], [vars(op)[name] for name in ('forward', 'backward')]\n"
               "    while todo:\n        f = todo.pop()\n        f = getattr(f, '__func__', f)\n"
               "        code = getattr(f, '__code__', None)\n        if code is None or f in seen:\n            continue\n"
               "        seen.append(f)\n        yield from code.co_consts\n"
               "        for cell in f.__closure__ or ():\n            yield cell.cell_contents\n"
               "            todo.append(cell.cell_contents)\n        for value in f.__globals__.values():\n"
               "            yield value\n")
    test = ("import numpy as np\nfrom autograder.inside import checks\n"
            "def offset_op(scale, delta):\n    def forward(ctx, x):\n        return scale * x\n"
            "    def backward(ctx, grad):\n        out = scale * grad\n        out[1] += delta\n        return out\n"
            "    return checks.op_in_grader(Function, 'Offset', forward, backward)\n"
            "op = offset_op(2.0, 0.8125)\n"
            "out, grad = probe(op)\n"
            "assert np.array_equal(out, [0.0, 2.0, 4.0]) and np.array_equal(grad, [2.0, 2.8125, 2.0]), (out, grad)\n"
            "assert all(not isinstance(v, float) or v != 0.8125 for v in reachable(op)), 'the rule reached the kernel'\n")
    asked = callbacks_asked(own_kernel, student, test)
    assert asked.count("call") == 1, asked  # one round trip: the backward (and the probe's reads of the rule, refused)


def test_a_torch_value_from_an_array_the_students_code_had_is_a_fault_of_the_test(own_kernel):
    """An array that the student's code received (or that the test took from the kernel without a
    copy) shares its buffer with the kernel, whose writes into it reach the grader: a test that
    computes a torch oracle's value or central differences from it would judge the student against
    what the student's code left there (red teams, stop 39). The grader refuses, whatever the
    student's code did: a reference notebook fails too, so CI finds such a test. From a copy made
    before the call, it is the test's own value."""
    student = "import numpy as np\ndef wipes(x):\n    x[...] = 0\n    return np.exp(x)\n"
    after = ("import numpy as np\nfrom autograder.inside import checks\nx = checks.randn(1, 3)\n"
             "got = checks.run_student('wipes', wipes, x)\nchecks.oracle_value('exp', x)\n")
    before = ("import numpy as np\nfrom autograder.inside import checks\nx = checks.randn(1, 3)\n"
              "expected = checks.oracle_value('exp', x)\nmine = x.copy()\ngot = checks.run_student('wipes', wipes, x)\n"
              "assert not np.array_equal(mine, x)  # the write reached the test's x\n"
              "checks.oracle_value('exp', mine)\nchecks.assert_close(got, expected, task='wipes')\n")
    remote = student_remote(own_kernel, student)
    outputs = verdicts.run_test_cell(remote, before, {})
    assert [o["ename"] for o in outputs] == ["AssertionError"] and "[wipes]" in outputs[0]["evalue"], outputs
    with pytest.raises(verdicts.GraderFault, match="can write into"):  # (it ends the notebook's grading)
        verdicts.run_test_cell(remote, after, {})


PLANNED_STUDENT = (
    "import numpy as np\ncalls = []\n"
    "def tanh(x):\n    calls.append('tanh')\n    return np.tanh(x)\n"
    "def tanh_backward(x, grad):\n    calls.append('tanh_backward')\n    return grad * (1 - np.tanh(x) ** 2)\n"
    "class Tanh:\n    @staticmethod\n    def forward(ctx, x):\n        calls.append('forward')\n"
    "        out = np.tanh(x)\n        ctx.save_for_backward(out)\n        return out\n"
    "    @staticmethod\n    def backward(ctx, grad):\n        calls.append('backward')\n"
    "        out, = ctx.saved_tensors\n        ctx.saved = None\n        return grad * (1 - out ** 2)\n"
    "def size(shape):\n    calls.append('size')\n    return int(np.prod(shape))\n")
PLANNED_TEST = (
    "from autograder.inside import checks\nimport numpy as np\n"
    "cases = [checks.case(f'case {i}', checks.randn(i, 3, 2)) for i in range(4)]\n"
    "checks.against_torch('tanh', tanh, 'tanh', cases)\n"
    "checks.check_vjp('tanh_backward', tanh_backward, 'tanh', cases[:3])\n"
    "checks.check_function('Tanh', Tanh, 'tanh', cases[:2], saves=lambda x, out: [(out,)])\n"
    "shapes = [checks.case(f'shape {i}', (i, 2)) for i in range(3)]\n"
    "checks.check_layout('size', size, lambda shape: int(np.prod(shape)), shapes)\n")


def _without_plans(remote):
    """``remote`` asking for each call on its own, as before plans (for comparing with them)."""
    remote._send_plan = lambda steps: None
    return remote


@pytest.fixture()
def own_kernel():
    """A kernel of the test's own. The recording's codec in a kernel lives as long as the kernel, and
    grading makes one Remote per kernel: a second Remote, as the tests above make on the module's
    kernel, numbers its arrays afresh, and a number that an earlier Remote's array still holds in
    the kernel (test_with_blocks_exceptions_and_array_identity_reach_the_students_objects keeps
    one in a Box) would name that array."""
    yield from _a_kernel()


def test_a_checks_calls_of_the_students_code_go_to_the_kernel_in_one_request(own_kernel):
    """against_torch, check_vjp, check_function and check_layout send every call they will make of
    the student's code in one request (a plan), and take the answers from it; the student's code
    sees the same calls in the same order, and a wrong answer, an exception or a backward that frees
    what forward saved (read by the checks between the two) gives the same verdict as one request a call."""
    outputs, counts, seen = {}, {}, {}
    for planned in (True, False):
        remote = student_remote(own_kernel, PLANNED_STUDENT)
        remote = remote if planned else _without_plans(remote)
        requests, request = [], remote.request
        remote.request = lambda payload, **fields: (requests.append(fields), request(payload, **fields))[1]
        namespace = {}
        outputs[planned] = verdicts.run_test_cell(remote, PLANNED_TEST, namespace)
        counts[planned] = len(requests)
        assert verdicts.run_test_cell(remote, "seen = list(calls)", namespace) == []
        seen[planned] = namespace["seen"]
        if planned:
            assert remote.plans == [4, 0], remote.plans  # four plans, none dropped
    assert outputs[True] == outputs[False] == []
    assert seen[True] == seen[False] and len(seen[True]) == 4 + 3 * 3 + 2 * 6 + 3
    assert counts[False] >= 30 and counts[True] <= 8, counts  # the four checks, and their few own reads

    wrong = [("np.tanh(x)\n", "np.tanh(x) if x[0, 0] < 0.5 else 0 * x\n"),  # wrong at one case
             ("return grad * (1 - np.tanh(x) ** 2)", "return grad * (1 - np.tanh(x) ** 2) if x.flags.c_contiguous "
              "else 1 / 0"),  # raises on the non-contiguous call
             ("out, = ctx.saved_tensors", "out, = ctx.saved_tensors\n        out = np.asarray(out)[::-1]")]
    for old, new in wrong:
        student = PLANNED_STUDENT.replace(old, new)
        verdict = {planned: verdicts.run_test_cell(
            student_remote(own_kernel, student) if planned else _without_plans(student_remote(own_kernel, student)),
            PLANNED_TEST, {}) for planned in (True, False)}
        assert verdict[True] == verdict[False] and verdict[True] and "Error" in verdict[True][0]["ename"], (new, verdict)


def test_a_plan_that_the_checks_leave_is_asked_for_again(own_kernel):
    """A student's function that returns an object of its own makes the checks ask for more than
    the plan holds (its array): the plan is dropped, and the calls from there on are asked one by
    one, with the same verdict."""
    student = ("import numpy as np\nclass Lazy:\n    def __init__(self, x):\n        self.x = np.array(x)  # (its own copy: see own_kernel)\n"
               "    def __array__(self, dtype=None, copy=None):\n        return np.tanh(self.x)\n"
               "def tanh(x):\n    return Lazy(x)\n")
    test = ("from autograder.inside import checks\n"
            "checks.against_torch('tanh', tanh, 'tanh', [checks.case(f'case {i}', checks.randn(i, 3)) for i in range(3)],"
            " check_dtype=False)\n")
    remote = student_remote(own_kernel, student)
    assert verdicts.run_test_cell(remote, test, {}) == []
    assert remote.plans == [1, 1]
    assert verdicts.run_test_cell(_without_plans(student_remote(own_kernel, student)), test, {}) == []


def test_what_a_worker_works_out_once_of_a_tests_function_follows_its_cell():
    """What the grader works out of a test's function (its text, whether it only computes, the names it
    reads) is kept for the worker's life, for every notebook of the class: keyed by the code and its
    cell's syntax tree, so that the same code in a cell that hides it is never sent."""
    visible = "x = 0\ndef helper(a):\n    return a + 1\n"
    hidden = "### BEGIN HIDDEN TESTS\ndef helper(a):\n    return a + 1\n"
    codes = []
    for i, source in enumerate((visible, hidden)):
        namespace = {}
        exec(compile(source, f"<test cell {i}>", "exec"), namespace)
        codes.append(namespace["helper"].__code__)
    assert codes[0] == codes[1], "the same code: only its cell tells them apart"
    shown, kept = (verdicts._code_facts(code, *verdicts._parsed(source)) for code, source in zip(codes, (visible, hidden)))
    assert shown == (("helper", "def helper(a):\n    return a + 1"), True, [])
    assert kept == (None, True, [])


MAKING_STUDENT = """import numpy as np
seen = []
def build(engine, n):
    ts = [engine.Tensor(np.full(2, float(i))) for i in range(n)]
    out = engine.Double.apply(ts[-1])
    return float(out.data[0])
def fails(engine):
    t = engine.Tensor(np.ones(2))
    bad = engine.Fail.apply(t)  # the call that raises
    seen.append("ran on")  # (not waited for: the student's code goes on to its next exchange)
    return float(bad.data[0])
def fails_last(engine):
    engine.Fail.apply(engine.Tensor(np.ones(2)))  # the call that raises
    return "returned"
def fails_then_raises(engine):
    engine.Fail.apply(engine.Tensor(np.ones(2)))  # the call that raises
    raise ValueError("the student's own")
kept = []
def keeps(engine):
    bad = engine.Fail.apply(engine.Tensor(np.ones(2)))  # the call that raises
    kept.extend([bad, engine.Tensor(np.ones(2))])  # (the second call is never run)
    return float(bad.data[0])
def caught(engine):
    try:
        engine.Fail.apply(engine.Tensor(np.ones(2)))
    except RuntimeError as error:
        return str(error)
def caught_above(engine):
    try:
        return fails(engine)
    except RuntimeError:
        return "caught above"
def caught_later(engine):
    bad = engine.Fail.apply(engine.Tensor(np.ones(2)))  # the call that raises
    try:
        return float(bad.data[0])
    except Exception:
        return "caught later"
"""
MAKING_TEST = """import types
class Tensor:
    lends = frozenset({"data"})
    makes = frozenset({"__init__"})
    def __init__(self, data):
        self.data = np.asarray(data, dtype=float)
class Double:
    lends = makes = frozenset({"apply"})
    @classmethod
    def apply(cls, t):
        return Tensor(2 * t.data)
class Fail:
    lends = makes = frozenset({"apply"})
    @classmethod
    def apply(cls, t):
        raise RuntimeError("how the grader's object failed")
engine = types.SimpleNamespace(Tensor=Tensor, Double=Double, Fail=Fail)
assert build(engine, 50) == 98.0
"""


def test_calls_that_make_are_not_waited_for_and_what_they_raise_is_raised_where_they_were_made(kernel):
    """1.8's differential tests make some 6,000 tensors a notebook (``engine.Tensor(...)``,
    ``Op.apply(...)``): the kernel sends those calls without waiting for each answer. One that
    raises stops the student's code at its next exchange with the grader, or at the request's end,
    and is recorded as raised by the call, at its line, before any error of the student's own that
    came after it. A call that a handler of the student's code covers is waited for, so that the
    handler catches what it raises; a handler entered after the call does not. The objects of the
    calls not run stay the notebook's to keep (and to send back)."""
    remote, asked = student_remote(kernel, MAKING_STUDENT), []
    run_callback = remote._run_callback
    remote._run_callback = lambda ask: (asked.append("promise" in ask), run_callback(ask))[1]
    assert verdicts.run_test_cell(remote, MAKING_TEST, {}) == []
    assert asked.count(True) == 51 and asked.count(False) <= 2, asked  # (out.data, at most Double.apply)
    source = MAKING_STUDENT.splitlines()
    lines = {}  # the line of each function's call that raises
    for name in ("fails", "fails_last", "fails_then_raises", "caught_later"):
        start = source.index(next(line for line in source if line.startswith(f"def {name}(")))
        lines[name] = 1 + next(i for i in range(start, len(source)) if "the call that raises" in source[i])
    for name, line in lines.items():
        test = (f"try:\n    got = {name}(engine)\nexcept RuntimeError as error:\n    got = error\n"
                f"assert isinstance(got, RuntimeError) and str(got) == \"the grader's object raised RuntimeError\", got\n"
                f"assert got.frames[-1][1:] == [{name!r}, {line}], got.frames\n")
        assert verdicts.run_test_cell(remote, MAKING_TEST + test, {}) == [], name
    assert verdicts.run_test_cell(remote, MAKING_TEST + (  # a handler covers these calls: each is waited for
        "assert caught(engine) == \"the grader's object raised RuntimeError\"\n"
        "assert caught_above(engine) == 'caught above'\n"
        "assert seen == ['ran on'], seen  # (fails ran on once, before: not under caught_above)\n"), {}) == []
    assert verdicts.run_test_cell(remote, MAKING_TEST + "try:\n    keeps(engine)\nexcept RuntimeError:\n    pass\n",
                                  {}) == []
    assert verdicts.run_test_cell(remote, "assert [type(made).__name__ for made in kept] == ['Unmade'] * 2, kept\n",
                                  {}) == []  # (a notebook's list goes by value: read in the next cell)


def test_a_kernel_leaves_unanswered_only_calls_that_make_on_data_and_numbers_their_objects_below_zero():
    """What a forged kernel could send as a call not waited for: the grader runs it only on an object
    whose class says that it makes, with data and the tests' objects for arguments (nothing that would
    ask the kernel back), under a new number below 0; else WireError, the kernel's doing. A maker that
    returns no object of the tests' is the grader's own fault."""
    remote = verdicts.Remote(None, 60)

    class Tensor:
        lends, makes = frozenset({"data"}), frozenset({"__init__"})

        def __init__(self, data=0.0):
            self.data = data

    class Broken:
        lends, makes = frozenset(), frozenset({"__init__"})
        __new__ = lambda cls: 42

    maker, other, broken = (remote.callbacks.number(obj) for obj in (Tensor, Tensor(), Broken))
    assert remote._ref(Tensor) == ("callback", maker, True) and len(remote._ref(Tensor())) == 2

    def make(promise, callback=maker, builtin="call", args=(np.ones(2),), kwargs=None):
        remote._make({"promise": promise, "callback": callback, "builtin": builtin, "args": args, "kwargs": kwargs or {}})

    make(-1)
    made = remote.callbacks.get(-1)
    assert type(made) is Tensor and remote.made == [(-1, made)]
    make(-2, args=((1, "a", made),))  # (a tuple holding the tests' own object)
    for refused in [dict(promise=3), dict(promise=-1), dict(promise="-4"), dict(promise=-4, callback=other),
                    dict(promise=-4, builtin="getattr"), dict(promise=-4, args=(remote._resolve("handle", 9),)),
                    dict(promise=-4, args=(print,)), dict(promise=-4, kwargs={"data": [Tensor]})]:
        with pytest.raises(WireError):
            make(**refused)
    with pytest.raises(verdicts.GraderFault):
        make(-5, callback=broken, args=())
