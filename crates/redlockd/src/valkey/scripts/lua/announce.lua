
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
