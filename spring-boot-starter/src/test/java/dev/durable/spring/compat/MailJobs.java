package dev.durable.spring.compat;

import dev.durable.JobDefinition;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

// tag::spring-job-bean[]
@Configuration(proxyBeanMethods = false)
class MailJobs {

    @Bean
    JobDefinition<Email, String> sendEmail(Mailer mailer) {
        return JobDefinition.of("send-email", Email.class, (Email email) -> mailer.send(email)).queue("mail");
    }
}
// end::spring-job-bean[]
