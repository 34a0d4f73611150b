{% set label = '%s-%s' % (data['app'], data['env']) %}
{% set msg = 'deploy {} to {} ({}%)'.format(data['app'], data['env'], data['pct']) %}
notify_{{ label }}:
  runner.http.query:
    - url: 'https://chat.example.com/hook'
    - method: POST
    - data: "{{ msg }}"
    - params:
        pct: '%05.1f'
        text: "{{ '%-8s|%5d|%.2f|%r|%x' % (data['app'], data['n'], data['pct'], data['app'], data['n']) }}"
        fmt2: "{{ '{0}/{1}/{0}'.format(data['app'], data['n']) }}"
        fmt3: "{{ '{:>6}|{:<4}|{:^7}|{:.3f}|{:05d}'.format(data['app'], data['n'], data['env'], data['pct'], data['n']) }}"
        filt: "{{ '%s:%s'|format(data['app'], data['n']) }}"
        named: "{{ '%(app)s@%(env)s' % data }}"
