-- searcheval tune: the digest of the effective grades each trial was scored with. A resumed
-- study whose grades changed since (new human grades, a judge's grades that now count, another
-- judgment rule) rescores its stored trials instead of reusing their metrics.
ALTER TABLE tune_trials ADD COLUMN IF NOT EXISTS grades text;
