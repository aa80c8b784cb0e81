#!/usr/bin/python3
"""End-to-end (issue #21): the native API's calls on pelotond's /metrics
(docs/metrics.md, "Native API"). pelotond with the API server and native
roles on a real redis-server; calls by grpcio and by YARPC's HTTP transport
(JSON and a body that does not decode); the counter by service, method,
transport and gRPC code, and the latency histogram, read from /metrics.
pelotond --metrics=false serves the native API and counts nothing."""
import http.client
import re
import urllib.error
import urllib.request

import nativeclient
import services
from simlib import run_tests

nativeclient.generate_stubs()
import grpc  # noqa: E402
from peloton.api.v0 import peloton_pb2 as pb  # noqa: E402
from peloton.api.v0.respool import respool_pb2 as rp  # noqa: E402

PROC, PORT, LOG, NPORT = nativeclient.start_pelotond(services.start_redis(), "--roles=apiserver,native")
RM = "peloton.api.v0.respool.ResourceManager"


def metrics(port=PORT):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text, name, **labels):
    """The value of the sample name{labels} (labels in the order written), or None."""
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


def yarpc(proc, body, enc="json"):
    c = http.client.HTTPConnection("127.0.0.1", NPORT, timeout=20)
    c.request("POST", "/api/v1", body=body, headers={"Rpc-Procedure": proc, "Rpc-Encoding": enc,
                                                     "Rpc-Caller": "test", "Rpc-Service": "peloton"})
    r = c.getresponse()
    return r.status, r.read()


def lookup(ch, path):
    return nativeclient.unary(ch, f"/{RM}/LookupResourcePoolID", rp.LookupRequest(path=rp.ResourcePoolPath(value=path)),
                              rp.LookupResponse)


def test_grpc_calls_counted_by_code():
    ch = nativeclient.channel(NPORT)
    nativeclient.create_pool(ch, "nm-pool", (1, 2), (1024, 2048))
    for _ in range(3):
        assert lookup(ch, "/nm-pool").id.value == "nm-pool"
    r = nativeclient.unary(ch, f"/{RM}/GetResourcePool", rp.GetRequest(id=pb.ResourcePoolID(value="nope")),
                           rp.GetResponse)
    ch.close()
    text = metrics()
    ok = dict(service=RM, method="LookupResourcePoolID", transport="grpc", code="OK")
    assert sample(text, "peloton_native_requests_total", **ok) == 3, text
    assert sample(text, "peloton_native_requests_total", service=RM, method="CreateResourcePool", transport="grpc",
                  code="OK") == 1, text
    assert "# TYPE peloton_native_requests_total counter" in text
    assert "# TYPE peloton_native_request_duration_seconds histogram" in text
    timed = dict(service=RM, method="LookupResourcePoolID")
    assert sample(text, "peloton_native_request_duration_seconds_count", **timed) == 3, text
    assert sample(text, "peloton_native_request_duration_seconds_bucket", **timed, le="+Inf") == 3, text
    assert 0 < sample(text, "peloton_native_request_duration_seconds_sum", **timed) < 60, text
    # v0's GetResourcePool answers a missing pool in its response's error field: the call itself is OK
    assert r.error.notFound.id.value == "nope" or r.error.ListFields(), r
    assert sample(text, "peloton_native_requests_total", service=RM, method="GetResourcePool", transport="grpc",
                  code="OK") == 1, text


def test_yarpc_calls_and_refusals_counted():
    st, body = yarpc(f"{RM}::LookupResourcePoolID", b'{"path": {"value": "/nm-pool"}}')
    assert st == 200, (st, body)
    st, body = yarpc(f"{RM}::LookupResourcePoolID", b'{"path": ', "json")  # does not decode
    assert st == 400, (st, body)
    st, body = yarpc(f"{RM}::NoSuchMethod", b"{}")  # not served: not counted (its name is the client's)
    assert st != 200, (st, body)
    text = metrics()
    assert sample(text, "peloton_native_requests_total", service=RM, method="LookupResourcePoolID",
                  transport="yarpc", code="OK") == 1, text
    assert sample(text, "peloton_native_requests_total", service=RM, method="LookupResourcePoolID",
                  transport="yarpc", code="INVALID_ARGUMENT") == 1, text
    assert "NoSuchMethod" not in text
    # a call refused before its method ran is counted, not timed
    assert sample(text, "peloton_native_request_duration_seconds_count", service=RM,
                  method="LookupResourcePoolID") == 4, text


def test_grpc_error_code_counted():
    ch = nativeclient.channel(NPORT)
    try:
        # an undecodable request: INVALID_ARGUMENT, counted under the method
        call = ch.unary_unary(f"/{RM}/LookupResourcePoolID", request_serializer=lambda b: b,
                              response_deserializer=rp.LookupResponse.FromString)
        try:
            call(b"\x0a\xff\xff\xff", timeout=20, wait_for_ready=True)
            assert False, "an undecodable request was answered"
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    finally:
        ch.close()
    assert sample(metrics(), "peloton_native_requests_total", service=RM, method="LookupResourcePoolID",
                  transport="grpc", code="INVALID_ARGUMENT") == 1


def test_metrics_off_counts_nothing():
    _, port, _, nport = nativeclient.start_pelotond(services.start_redis(), "--roles=apiserver,native",
                                                     "--metrics=false")
    c = http.client.HTTPConnection("127.0.0.1", nport, timeout=20)
    c.request("POST", "/api/v1", body=b'{"path": {"value": "/"}}',
              headers={"Rpc-Procedure": f"{RM}::LookupResourcePoolID", "Rpc-Encoding": "json",
                       "Rpc-Caller": "test", "Rpc-Service": "peloton"})
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
    try:
        text = metrics(port)
    except urllib.error.HTTPError as e:
        assert e.code == 404, e
        return
    assert not re.search(r"^peloton_native_requests_total\{", text, re.M), text


run_tests("test_native_metrics", dict(globals()))
