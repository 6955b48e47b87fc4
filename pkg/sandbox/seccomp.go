package sandbox

func compileSeccomp(p *Policy) ([]byte, error) { return nil, nil }
