# Drives a Beanstalk server with the Beaneater client (Debian's
# ruby-beaneater). Usage: ruby beanstalk_beaneater.rb HOST:PORT [sharded]
# Prints "ok" and exits 0 when every check passes; a failed check raises.
# With "sharded" (a gateway whose tubes live on several servers), the two
# jobs of the priority check go to one tube: priority order holds within
# each server, not across them.
require 'beaneater'

def check(what, got, want)
  raise "#{what}: got #{got.inspect}, want #{want.inspect}" unless got == want
end

def raises(what, klass)
  yield
  raise "#{what}: no #{klass} raised"
rescue klass
  nil
end

bean = Beaneater.new(ARGV.fetch(0))
tubes = bean.tubes

# put / reserve / delete, with a binary body holding CRLF.
body = "bin\r\nary\x00\xff\r\n".b
default = tubes['default']
res = default.put(body, pri: 10, delay: 0, ttr: 60)
check('put status', res[:status], 'INSERTED')
job = tubes.reserve(0)
check('reserved body', job.body.b, body)
check('reserved id', job.id.to_s, res[:id].to_s)
job.delete
check('exists after delete', job.exists?, false)

# Priorities across watched tubes.
hi = tubes['rb-hi']
lo = tubes['rb-lo']
(ARGV[1] == 'sharded' ? hi : lo).put('lo', pri: 100)
hi.put('hi', pri: 1)
tubes.watch!('rb-hi', 'rb-lo')
check('watched', tubes.watched.map(&:name).sort, ['rb-hi', 'rb-lo'])
job = tubes.reserve(1)
check('urgent first', job.body, 'hi')

# release, bury, kick, peek.
job.release(pri: 1)
job = tubes.reserve(1)
check('after release', job.body, 'hi')
job.bury
check('buried peek', hi.peek(:buried).body, 'hi')
check('stats-job state', job.stats.state, 'buried')
check('kick', hi.kick(5)[:status], 'KICKED')
check('ready again', hi.peek(:ready).body, 'hi')
job.delete
tubes.reserve(1).delete # lo

# Delays and kick-job.
res = hi.put('later', delay: 3600)
check('peek delayed', hi.peek(:delayed).body, 'later')
bean.jobs.find(res[:id]).kick
check('no delayed left', hi.peek(:delayed), nil)
tubes.reserve(1).delete
hi.put('soon', delay: 1)
t0 = Time.now
job = tubes.reserve(5)
check('delayed body', job.body, 'soon')
raise "delayed job came after #{Time.now - t0}s" if Time.now - t0 < 0.5

# TTR: touch, then DEADLINE_SOON inside the last second.
job.touch
job.delete
hi.put('ttr', ttr: 1)
job = tubes.reserve(1)
raises('second reserve in the margin', Beaneater::DeadlineSoonError) { tubes.reserve(1) }
begin
  job.delete
rescue Beaneater::NotFoundError
  # The job's one second ran out first (a loaded machine): it is ready again.
  tubes.reserve(5).delete
end
raises('empty reserve', Beaneater::TimedOutError) { tubes.reserve(0) }

# Stats, tubes, pause.
res = hi.put('s')
stats = bean.stats
check('current-jobs-ready', stats.current_jobs_ready, 1)
check('max-job-size', stats.max_job_size, 65535)
check('tube stats', hi.stats.current_jobs_ready, 1)
hi.pause(60)
check('pause', hi.stats.pause, 60)
check('tube list', tubes.all.map(&:name).sort, ['default', 'rb-hi', 'rb-lo'])
check('find', bean.jobs.find(res[:id]).body, 's')
check('find missing', bean.jobs.find(999_999), nil)
bean.close
puts 'ok'
