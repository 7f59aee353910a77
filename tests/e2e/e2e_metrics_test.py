#!/usr/bin/env python3
"""hvdagent --metrics-listen, scraped by a real Prometheus server.

One hvdagent on loopback (two fake GPUs, HVD_FAKE_GPUS=2) with its metrics on an ephemeral port;
jobs run through it with hvdrun: one that completes, one that fails after two restarts, one
submitted that runs (holding both GPUs) and one queued behind it, both then cancelled. Debian's
`prometheus` scrapes the agent every second (a generated config, an ephemeral port, a temporary
storage dir), and every figure is read back through Prometheus' HTTP API (/api/v1/query), so
the test pins down what an operator's dashboard would show, format and names included.

usage: e2e_metrics_test.py --hvdagent PATH --hvdrun PATH [--prometheus PATH]

Exit 0: passed; 1: failed (the agent's and Prometheus' logs are printed); 77: skipped (no
prometheus binary). Every process has a timeout and is killed at the end; the temporary
directory is removed.
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
# How long a figure may take to show: a scrape every second, plus the agent's own pace (a
# queued job is noticed within its queue poll, a cancelled one ends within its grace).
SETTLE_S = 30
HVDRUN_TIMEOUT_S = 60


class Failure(Exception):
    pass


def free_port():
    # Bound and released: Prometheus takes it a moment later (it cannot report a port 0 bind).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_for_file(path, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f'{proc.args[0]} exited with {proc.returncode} before writing {path}')
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise Failure(f'{path} did not appear within {timeout} s')


def http_get(url, timeout=5):
    """(status, content type, body) of a GET, for any status."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get('Content-Type', ''), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get('Content-Type', ''), e.read().decode()


class Prometheus:
    def __init__(self, port):
        self.base = f'http://127.0.0.1:{port}'

    def query(self, expr):
        """The values of an instant query, by the series' labels (without __name__)."""
        url = self.base + '/api/v1/query?' + urllib.parse.urlencode({'query': expr})
        status, _, body = http_get(url)
        if status != 200:
            raise Failure(f'query {expr!r}: HTTP {status}: {body}')
        answer = json.loads(body)
        if answer.get('status') != 'success':
            raise Failure(f'query {expr!r}: {answer}')
        out = {}
        for series in answer['data']['result']:
            labels = {k: v for k, v in series['metric'].items() if k != '__name__'}
            out[tuple(sorted(labels.items()))] = float(series['value'][1])
        return out

    def value(self, expr):
        """The one value of `expr`, or None while it has none (not scraped yet)."""
        values = self.query(expr)
        if len(values) > 1:
            raise Failure(f'query {expr!r}: more than one series: {values}')
        return next(iter(values.values()), None)

    def wait_value(self, expr, expected, timeout=SETTLE_S):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.value(expr)
            except (OSError, Failure) as e:  # Prometheus still starting
                last = f'<{e}>'
            if last == expected:
                print(f'  {expr} = {last}')
                return
            time.sleep(0.25)
        raise Failure(f'{expr}: expected {expected}, last seen {last} (after {timeout} s)')


class Cluster:
    """The agent, hvdrun and Prometheus, all under one temporary directory."""

    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix='hvd-metrics-e2e-')
        os.chmod(self.tmp, 0o700)
        self.key = os.path.join(self.tmp, 'cluster.key')
        with open(os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), 'wb') as f:
            f.write(os.urandom(32))
        self.root = os.geteuid() == 0
        self.procs = []  # (name, Popen, log path)
        self.agent_port = None
        self.metrics_port = None
        self.prometheus = None

    def start(self, name, argv, env=None):
        log = os.path.join(self.tmp, name + '.log')
        with open(log, 'wb') as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.tmp, start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def start_agent(self):
        env = dict(os.environ, HVD_FAKE_GPUS='2')
        argv = [self.args.hvdagent, '--listen', '127.0.0.1:0', '--port-file',
                os.path.join(self.tmp, 'agent.port'), '--metrics-listen', '127.0.0.1:0',
                '--metrics-port-file', os.path.join(self.tmp, 'metrics.port'), '--key-file',
                self.key, '--state-dir', os.path.join(self.tmp, 'state'), '--shutdown-grace', '2']
        if self.root:
            argv.append('--allow-run-as-root')
            env['HVD_ALLOW_RUN_AS_ROOT_CONFIRM'] = '1'
        agent = self.start('hvdagent', argv, env)
        # The metrics' port file is written before the agent's own (hvdagent_main.cc).
        self.agent_port = wait_for_file(os.path.join(self.tmp, 'agent.port'), agent, 20)
        self.metrics_port = wait_for_file(os.path.join(self.tmp, 'metrics.port'), agent, 1)

    def start_prometheus(self):
        port = free_port()
        config = os.path.join(self.tmp, 'prometheus.yml')
        with open(config, 'w') as f:
            f.write('global:\n'
                    '  scrape_interval: 1s\n'
                    '  scrape_timeout: 1s\n'
                    '  evaluation_interval: 1s\n'
                    'scrape_configs:\n'
                    '  - job_name: hvdagent\n'
                    '    static_configs:\n'
                    f"      - targets: ['127.0.0.1:{self.metrics_port}']\n")
        self.start('prometheus', [self.args.prometheus, f'--config.file={config}',
                                  f'--storage.tsdb.path={os.path.join(self.tmp, "tsdb")}',
                                  f'--web.listen-address=127.0.0.1:{port}', '--log.level=warn'])
        self.prometheus = Prometheus(port)

    def hvdrun(self, *args, expect=0):
        argv = [self.args.hvdrun] + list(args)
        result = subprocess.run(argv, cwd=self.tmp, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=HVDRUN_TIMEOUT_S)
        out = result.stdout.decode(errors='replace')
        if result.returncode != expect:
            raise Failure(f'{" ".join(argv)}: exit {result.returncode}, expected {expect}:\n{out}')
        return out

    def job_args(self):
        """What a run or a submit through this agent needs beside -np and the program."""
        extra = ['--allow-run-as-root'] if self.root else []
        return ['-H', '127.0.0.1:2', '--agent-port', str(self.agent_port), '--key-file',
                self.key] + extra

    def agent_args(self):
        return ['-H', '127.0.0.1', '--agent-port', str(self.agent_port), '--key-file', self.key]

    def stop(self, dump):
        for name, proc, log in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            # Whatever is left of its session (the agent's ranks, should it hang): killed.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            if dump:
                with open(log, errors='replace') as f:
                    text = f.read()
                print(f'---- {name} (exit {proc.returncode}), last lines of its log ----')
                print('\n'.join(text.splitlines()[-40:]))
        shutil.rmtree(self.tmp, ignore_errors=True)


def submitted_id(out):
    for word in out.split():
        if word.startswith('hvd-'):
            return word.strip('`.,')
    raise Failure(f'no job id in: {out}')


def run(c):
    c.start_agent()
    base = f'http://127.0.0.1:{c.metrics_port}'
    status, ctype, body = http_get(base + '/metrics')
    if status != 200 or not ctype.startswith('text/plain; version=0.0.4'):
        raise Failure(f'GET /metrics: {status} {ctype!r}')
    if 'hvd_agent_gpus 2\n' not in body:
        raise Failure(f'GET /metrics lacks hvd_agent_gpus 2:\n{body}')
    if http_get(base + '/')[0] != 404:
        raise Failure('GET / is not 404')

    c.start_prometheus()
    p = c.prometheus
    print('prometheus scrapes the agent:')
    p.wait_value('up{job="hvdagent"}', 1.0)
    p.wait_value('hvd_agent_gpus', 2.0)
    p.wait_value('hvd_agent_slots', math.inf)

    print('a job that completes, and one that fails after two restarts:')
    c.hvdrun('-np', '2', *c.job_args(), '/bin/true')
    c.hvdrun('-np', '1', *c.job_args(), '--max-restarts', '2', 'sh', '-c', 'exit 3', expect=3)
    p.wait_value('hvd_agent_jobs{state="completed"}', 1.0)
    p.wait_value('hvd_agent_jobs{state="failed"}', 1.0)
    p.wait_value('hvd_agent_restarts_total', 2.0)
    p.wait_value('hvd_agent_queue_length', 0.0)
    p.wait_value('hvd_agent_gpus_free', 2.0)

    print('a submitted job holding both GPUs, and one queued behind it:')
    running = submitted_id(c.hvdrun('submit', '-np', '2', *c.job_args(), 'sleep', '120'))
    p.wait_value(f'hvd_agent_job_ranks_running{{job_id="{running}"}}', 2.0)
    p.wait_value('hvd_agent_ranks_running', 2.0)
    p.wait_value('hvd_agent_gpus_held', 2.0)
    p.wait_value('hvd_agent_gpus_free', 0.0)
    p.wait_value('hvd_agent_slots_held', 2.0)
    p.wait_value('hvd_agent_jobs{state="running"}', 1.0)
    queued = submitted_id(c.hvdrun('submit', '-np', '1', *c.job_args(), 'sleep', '120'))
    p.wait_value('hvd_agent_queue_length', 1.0)
    p.wait_value('hvd_agent_jobs{state="queued"}', 1.0)

    print('both cancelled:')
    c.hvdrun('cancel', queued, *c.agent_args())
    c.hvdrun('cancel', running, *c.agent_args())
    p.wait_value('hvd_agent_jobs{state="cancelled"}', 2.0)
    p.wait_value('hvd_agent_queue_length', 0.0)
    p.wait_value('hvd_agent_ranks_running', 0.0)
    p.wait_value('hvd_agent_gpus_free', 2.0)
    p.wait_value(f'count(hvd_agent_job_ranks_running{{job_id="{running}"}}) or vector(0)', 0.0)
    # Every state is a series of its own, and the version is a label of the info metric.
    states = p.query('hvd_agent_jobs')
    names = sorted(dict(labels)['state'] for labels in states)
    expected = sorted(['pending', 'queued', 'running', 'completed', 'failed', 'cancelled',
                       'timeout', 'lost'])
    if names != expected:
        raise Failure(f'hvd_agent_jobs states: {names}, expected {expected}')
    info = p.query('hvd_agent_info')
    if len(info) != 1 or not dict(next(iter(info)))['version'] or 1.0 not in info.values():
        raise Failure(f'hvd_agent_info: {info}')
    p.wait_value('hvd_agent_elastic_rounds_total', 0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hvdagent', required=True)
    parser.add_argument('--hvdrun', required=True)
    parser.add_argument('--prometheus', default=shutil.which('prometheus'))
    args = parser.parse_args()
    if not args.prometheus:
        print('SKIP: no prometheus binary (apt-get install prometheus)')
        return SKIP
    # The processes run in the temporary directory.
    args.hvdagent, args.hvdrun = os.path.abspath(args.hvdagent), os.path.abspath(args.hvdrun)
    c = Cluster(args)
    ok = False
    try:
        run(c)
        ok = True
    except (Failure, subprocess.TimeoutExpired, OSError) as e:
        print(f'FAILED: {e}')
    finally:
        c.stop(dump=not ok)
    print('PASSED' if ok else 'FAILED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
