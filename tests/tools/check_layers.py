#!/usr/bin/env python3
"""Dependencies point one way (docs/architecture.md "Layout"): no module includes a module above
it, and hvd's programs (agent/, launcher/) reach libhvd only through its public headers
(runtime/include/hvd) and what it offers them (runtime/support/hvd_support), never runtime/src.

usage: check_layers.py SOURCE_DIR [--self-test]

Prints every include that breaks a rule (file, the include, which rule) and exits 1 when there
is one. --self-test also checks that the rules catch a deliberately wrong include of each kind.
"""
import os
import re
import sys

# Lowest first. contract/ is below the runtime: libhvd includes its header-only part, and it
# needs nothing of the runtime but the public error types (hvd/error.hpp).
ORDER = ['contract', 'runtime', 'agent/common', 'agent/auth', 'agent/process', 'agent/node',
         'agent/ledger', 'agent/elastic', 'agent/coordinator', 'agent/relay', 'agent/rpc',
         'agent/client', 'agent/records', 'agent/jobs', 'agent/service', 'agent/metrics',
         'agent/daemon',
         'launcher']
# The first folder of an include that means libhvd's insides (runtime/src/<folder>/...).
RUNTIME_SRC = None  # filled from the tree
ALLOWED = {('contract', 'hvd/error.hpp')}
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')
SOURCES = ('.h', '.hpp', '.cc', '.c', '.cu')


def module_of_file(path):
    for m in sorted(ORDER, key=len, reverse=True):
        if path.startswith(m + '/'):
            return m
    return None


def module_of_include(include):
    if include.startswith('hvd/v1/'):
        return 'proto', False
    if include.startswith('hvd/') or include.startswith('hvd_support/'):
        return 'runtime', False
    top = include.split('/')[0]
    if top == 'agent':
        return '/'.join(include.split('/')[:2]), False
    if top in ('contract', 'launcher'):
        return top, False
    if top in RUNTIME_SRC:
        return 'runtime', True
    return None, False


def problems(path, include):
    own = module_of_file(path)
    target, internal = module_of_include(include)
    if own is None or target is None or target == 'proto' or (own, include) in ALLOWED:
        return []
    out = []
    if ORDER.index(target) > ORDER.index(own):
        out.append(f'{path}: includes "{include}": {target} is above {own}')
    if internal and own not in ('runtime',):
        out.append(f'{path}: includes "{include}": libhvd\'s insides (runtime/src); use '
                   'include/hvd or hvd_support/')
    return out


def scan(root):
    found = []
    for m in ORDER:
        for dirpath, _, files in os.walk(os.path.join(root, m)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                full = os.path.join(dirpath, f)
                path = os.path.relpath(full, root)
                with open(full, errors='replace') as text:
                    for line in text:
                        match = INCLUDE.match(line)
                        if match:
                            found += problems(path, match.group(1))
    return found


def self_test():
    cases = [('contract/x.cc', 'core/config.h'), ('contract/x.cc', 'agent/jobs/led_jobs.h'),
             ('agent/jobs/x.cc', 'agent/service/agent_service.h'),
             ('agent/jobs/x.cc', 'common/syscall_error.h'), ('launcher/x.cc', 'store/store.h'),
             ('agent/rpc/x.cc', 'launcher/cli.h')]
    fine = [('agent/jobs/x.cc', 'agent/records/job_history.h'), ('runtime/src/core/x.cc',
            'contract/worker_values.h'), ('launcher/x.cc', 'hvd_support/logging.h'),
            ('contract/x.cc', 'hvd/error.hpp')]
    missed = [c for c in cases if not problems(*c)] + [c for c in fine if problems(*c)]
    for c in missed:
        print(f'self-test: the rules judge {c} wrongly')
    return not missed


def main():
    global RUNTIME_SRC
    root = sys.argv[1]
    RUNTIME_SRC = {d for d in os.listdir(os.path.join(root, 'runtime', 'src'))
                   if os.path.isdir(os.path.join(root, 'runtime', 'src', d))}
    ok = True
    if '--self-test' in sys.argv[2:]:
        ok = self_test()
    found = scan(root)
    print('\n'.join(found))
    print(f'{len(found)} include(s) against the layers')
    return 0 if ok and not found else 1


if __name__ == '__main__':
    sys.exit(main())
