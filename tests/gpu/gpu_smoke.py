# The checks of tests/gpu/gpu_smoke.sh: a real quartermaster and qm-agent on a machine with an
# NVIDIA GPU. Slices and node labels from NVML, a whole-GPU claim prepared (CDI spec, device
# nodes present, a CUDA program runs on the UUID it names), an MPS claim prepared with a real
# nvidia-cuda-mps-control (a CUDA client runs through its pipe directory; the daemon survives an
# agent restart and is quit at unprepare), unprepare on pod deletion.
# Usage: gpu_smoke.py URL TOKEN CA_FILE CDI_DIR OUT_DIR  (QMW: the work directory of the script)
import json, os, ssl, subprocess, sys, time, urllib.request, urllib.error
url, token, ca, cdi_dir, out_dir = sys.argv[1:6]
ctx = ssl.create_default_context(cafile=ca)
def req(method, path, body=None, ctype="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url + path, data=data, method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": ctype, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(r, context=ctx, timeout=20) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
problems = []
def wait(what, fn, secs):
    end = time.time() + secs
    while True:
        v = fn()
        if v: return v
        if time.time() > end:
            print("TIMEOUT waiting for", what); problems.append("timed out waiting for " + what); return None
        time.sleep(0.3)
def save(name, obj):
    with open(os.path.join(out_dir, name), "w") as f: json.dump(obj, f, indent=1)
t0 = time.time()
slices = wait("resourceslices", lambda: (lambda s: s if s[1].get("items") else None)(req("GET", "/apis/resource.k8s.io/v1/resourceslices")), 60)
print("slices published after %.1f s" % (time.time() - t0))
items = slices[1]["items"] if slices else []
save("resourceslices.json", items)
for s in items:
    print("slice", s["metadata"]["name"], "driver", s["spec"]["driver"], "pool", s["spec"]["pool"], "node", s["spec"].get("nodeName"))
    for c in s["spec"].get("sharedCounters", []): print("  counterSet", json.dumps(c))
    for d in s["spec"].get("devices", []):
        attrs = {k: list(v.values())[0] for k, v in d.get("attributes", {}).items()}
        print("  device", d["name"], json.dumps(attrs, sort_keys=True))
        print("    capacity", json.dumps({k: v["value"] for k, v in d.get("capacity", {}).items()}), "taints", json.dumps(d.get("taints", [])))
st, nodes = req("GET", "/api/v1/nodes")
for n in nodes.get("items", []):
    print("node", n["metadata"]["name"])
    for k, v in sorted(n["metadata"].get("labels", {}).items()): print("  label", k, "=", v)
    for c in n.get("status", {}).get("conditions", []): print("  condition", c["type"], c["status"], c.get("reason"))
    print("  capacity", json.dumps(n.get("status", {}).get("capacity", {})))
save("nodes.json", nodes.get("items", []))
# A claim for one whole GPU, used by a pod.
print(req("POST", "/apis/resource.k8s.io/v1/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "real-gpu"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}})[0], "deviceclass")
print(req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "real"}})[0], "namespace")
def claim(name, config=None):
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "real-gpu"}}]}}
    if config: spec["devices"]["config"] = [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": config}}]
    return req("POST", "/apis/resource.k8s.io/v1/namespaces/real/resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec})
def pod(name, claim_name):
    return req("POST", "/api/v1/namespaces/real/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]}})
def ready(name):
    st, c = req("GET", "/apis/resource.k8s.io/v1/namespaces/real/resourceclaims/" + name)
    devs = c.get("status", {}).get("devices", [])
    if devs and any(cond.get("type") == "Ready" for d in devs for cond in d.get("conditions", [])): return c
    return None
def cdi_spec(uid):
    p = os.path.join(cdi_dir, "k8s.gpu.nvidia.com-claim_%s.json" % uid)
    return p if os.path.exists(p) else None
def run_claim(name, config, pod_name, extra):
    t = time.time()
    print(claim(name, config)[0], "claim", name, "|", pod(pod_name, name)[0], "pod", pod_name)
    c = wait(name + " Ready", lambda: ready(name), 60)
    if not c: 
        print(json.dumps(req("GET", "/apis/resource.k8s.io/v1/namespaces/real/resourceclaims/" + name)[1].get("status"), indent=1)); return
    print("claim %s prepared in %.2f s" % (name, time.time() - t))
    print("  allocation", json.dumps(c["status"]["allocation"]["devices"]["results"]))
    print("  status.devices", json.dumps(c["status"]["devices"]))
    st, p = req("GET", "/api/v1/namespaces/real/pods/" + pod_name)
    print("  pod node", p["spec"].get("nodeName"), "conditions", json.dumps([(x["type"], x["status"], x.get("reason")) for x in p.get("status", {}).get("conditions", [])]))
    path = cdi_spec(c["metadata"]["uid"])
    spec = json.load(open(path)) if path else None
    print("  CDI spec", path); print(json.dumps(spec, indent=1))
    if not spec: problems.append("no CDI spec for claim " + name)
    save("cdi-%s.json" % name, spec)
    if spec: extra(spec)
    t = time.time()
    print(req("DELETE", "/api/v1/namespaces/real/pods/" + pod_name)[0], "delete pod")
    gone = wait("CDI spec removed", lambda: path if not os.path.exists(path) else None, 60) if path else None
    print("  CDI spec removed after %.2f s" % (time.time() - t) if gone else "  CDI spec still there")
    podgone = wait("pod gone", lambda: req("GET", "/api/v1/namespaces/real/pods/" + pod_name)[0] == 404, 60)
    print("  pod object gone after %.2f s" % (time.time() - t) if podgone else "  pod still there")
    print(req("DELETE", "/apis/resource.k8s.io/v1/namespaces/real/resourceclaims/" + name)[0], "delete claim")
def cuda_under(env_extra, label):
    env = dict(os.environ); env.update(env_extra); env.pop("LD_LIBRARY_PATH", None)
    code = "import torch,os; x=torch.arange(1<<20,device='cuda',dtype=torch.float32); print('%s', torch.cuda.get_device_name(0), float(x.sum()))" % label
    r = subprocess.run(["python3", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    print("  cuda run (%s): rc=%d %s %s" % (label, r.returncode, r.stdout.strip(), r.stderr.strip()[-600:]))
    if "No module named 'torch'" in r.stderr: print("  (no torch here: the CUDA run is skipped)")
    elif r.returncode != 0: problems.append("the CUDA program failed: " + label)
def whole(spec):
    envs = dict(e.split("=", 1) for e in spec.get("containerEdits", {}).get("env", []) + [x for d in spec.get("devices", []) for x in d.get("containerEdits", {}).get("env", [])])
    for d in spec.get("devices", []) + [spec]:
        for n in d.get("containerEdits", {}).get("deviceNodes", []):
            print("  device node", n.get("path"), "exists on host:", os.path.exists(n.get("path")))
    uuid = envs.get("NVIDIA_VISIBLE_DEVICES", "")
    cuda_under({"CUDA_VISIBLE_DEVICES": uuid}, "visible=" + uuid)
run_claim("whole", None, "whole-pod", whole)
def mps_procs(names=("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")):
    # "pid args" lines of the MPS processes (matched on the program, not the agent's flags).
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return "".join(l + "\n" for l in out.splitlines()[1:]
                   if len(l.split()) > 1 and os.path.basename(l.split()[1]) in names)
def ps2_pids(text):
    return sorted(l.split()[0] for l in text.splitlines() if "nvidia-cuda-mps-control" in l)
class MPS:
    def __init__(self): self.stdout = mps_procs()
def restart_agent():
    w = os.environ["QMW"]; pid = int(open(w + "/agent.pid").read())
    t = time.time(); os.kill(pid, 15)
    while os.path.exists("/proc/%d" % pid) and time.time() - t < 15:
        try:
            if open("/proc/%d/stat" % pid).read().split()[2] == "Z": break
        except OSError: break
        time.sleep(0.1)
    print("  agent stopped after %.2f s; last log line: %s" % (time.time() - t, open(w + "/agent.log").read().strip().splitlines()[-1]))
    cmd = open(w + "/agent.cmd").read()
    p = subprocess.Popen(["bash", "-c", "exec " + cmd + " >> " + w + "/agent.log 2>&1"], start_new_session=False)
    open(w + "/agent.pid", "w").write(str(p.pid))
    wait("agent back", lambda: open(w + "/agent.log").read().count("watching assignments") >= 2, 30)
    time.sleep(1)
def mps(spec):
    edits = spec.get("containerEdits", {})
    envs = dict(e.split("=", 1) for e in edits.get("env", []))
    mounts = edits.get("mounts", [])
    print("  mounts", json.dumps(mounts))
    ps = MPS()
    print("  mps processes:\n" + ps.stdout)
    host_pipe = [m["hostPath"] for m in mounts if m.get("containerPath") == envs.get("CUDA_MPS_PIPE_DIRECTORY")]
    if host_pipe:
        e = {k: v for k, v in envs.items() if k.startswith("CUDA_MPS")}
        e["CUDA_MPS_PIPE_DIRECTORY"] = host_pipe[0]
        e["CUDA_VISIBLE_DEVICES"] = envs.get("NVIDIA_VISIBLE_DEVICES", "")
        cuda_under(e, "mps " + json.dumps(e))
        ps = MPS()
        print("  mps processes after the client:\n" + ps.stdout)
        restart_agent()
        c = ready("mps")
        print("  after the agent restart: claim Ready:", bool(c))
        if not c: problems.append("the MPS claim is not Ready after an agent restart")
        if ps2_pids(ps.stdout) != ps2_pids(mps_procs(("nvidia-cuda-mps-control",))):
            problems.append("the MPS control daemon did not survive the agent restart")
        log = open(os.environ["QMW"] + "/agent.log").read()
        print("  agent log: %d x 'watching assignments', %d x 'prepared claim real/mps', %d x 'stopped'" % (
            log.count("watching assignments"), log.count("prepared claim real/mps"), log.count("\n") and log.count(" stopped\n")))
        ps2 = MPS()
        print("  mps processes after the agent restart (same pids = daemon kept):\n" + ps2.stdout)
        cuda_under(e, "mps after agent restart")
if os.environ.get("MPS_BIN"):
    run_claim("mps", {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "8Gi"}}}, "mps-pod", mps)
    time.sleep(1)
    ps = MPS()
    print("mps processes after unprepare:\n" + ps.stdout)
    if "nvidia-cuda-mps-control" in ps.stdout: problems.append("the MPS control daemon still runs after unprepare")
else:
    print("no nvidia-cuda-mps-control on this machine: MPS not tried")
st, ev = req("GET", "/api/v1/namespaces/real/events")
for e in ev.get("items", []): print("event", e.get("type"), e.get("reason"), e.get("involvedObject", {}).get("name"), e.get("message"))
st, sl = req("GET", "/apis/resource.k8s.io/v1/resourceslices")
print("taints after the run:", json.dumps([d.get("taints") for s in sl.get("items", []) for d in s["spec"].get("devices", [])]))
if not items: problems.append("no ResourceSlice published")
print("%d problems" % len(problems))
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
