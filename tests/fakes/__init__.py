"""Local fakes of outside services: real servers on 127.0.0.1 speaking the documented protocols."""
