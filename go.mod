module github.com/jobgate/jobgate

go 1.26
